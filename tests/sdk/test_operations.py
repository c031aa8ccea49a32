"""Operations beyond chat through the official SDKs: `openai` (embeddings,
moderations, images, speech, transcriptions, models), `google-genai`
(`embed_content`, `count_tokens`, `models.list`), `cohere` (`embed`,
`rerank`, v2 and v1), `boto3` (`invoke_model` for embeddings and rerank,
`count_tokens`) and `anthropic` (`messages.count_tokens`).

Each SDK first calls the vendor fake (`switchyard mock-upstream`) directly,
so the fake's replies are ones that SDK accepts; then it calls the gateway,
whose lanes reach that same fake over HTTP in every protocol that has the
operation. Vectors and scores are checked against the fake's own
derivation (FNV-1a of the text), exactly and in input order.
"""

from __future__ import annotations

import base64
import json
import math
import os
import signal
import struct
import subprocess
import time

import pytest

from conftest import free_port, healthy
from sdk_support import PROTOCOLS

MASK = (1 << 64) - 1


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def vector(text: str, dims: int) -> list[float]:
    """The fake's embedding of `text` (crates/transport/src/mock_operation.rs)."""
    seed = fnv1a(text.encode())
    out = []
    for i in range(dims):
        h = fnv1a(((seed ^ ((i * 0x9E3779B97F4A7C15) & MASK)) & MASK).to_bytes(8, "little"))
        out.append(((h % 2049) - 1024) / 1024)
    return out


def int8(values: list[float]) -> list[int]:
    """The fake's int8 form of a vector: each value times 127, rounded half
    away from zero (crates/transport/src/mock_operation.rs, `quantize`)."""
    return [int(math.copysign(math.floor(abs(v) * 127 + 0.5), v)) for v in values]


def score(query: str, document: str) -> float:
    return (fnv1a(query.encode() + b"\0" + document.encode()) % 1025) / 1024


def words(*texts: str) -> int:
    return max(1, sum(len(t.split()) for t in texts))


TEXTS = ["the first text", "a second one", "third"]
QUERY = "capital of France"
DOCUMENTS = ["Paris is the capital of France", "Berlin is in Germany", "Madrid", "Rome is old"]

# Embed lanes: name, provider protocol, wire model, whether it carries `dimensions`.
EMBED_LANES = [
    ("embed-openai", "openai", "text-embedding-3-small", True),
    # Not "embed-gemini": google-genai embeds all contents as one for a model
    # whose name says gemini (a multimodal embedding model) but for
    # gemini-embedding-001.
    ("embed-google", "gemini", "gemini-embedding-001", True),
    ("embed-cohere", "cohere", "embed-v4.0", True),
    ("embed-titan", "bedrock", "amazon.titan-embed-text-v2:0", True),
    ("embed-bedrock-cohere", "bedrock", "cohere.embed-english-v3", False),
]
# Cohere's Embed v4 on Bedrock takes only its own sizes (256 to 1536), so it
# is not among the lanes asked for 4 values.
BEDROCK_COHERE_V4 = ("embed-bedrock-cohere-v4", "bedrock", "cohere.embed-v4:0")
RERANK_LANES = [
    ("rerank-cohere", "cohere", "rerank-v3.5"),
    ("rerank-bedrock", "bedrock", "cohere.rerank-v3-5:0"),
    ("rerank-server", "openai", "BAAI/bge-reranker-v2-m3"),
]
MEDIA_LANES = [
    ("moderation", "omni-moderation-latest", "moderation"),
    ("image", "gpt-image-1", "image"),
    ("tts", "gpt-4o-mini-tts", "speech"),
    ("stt", "gpt-4o-transcribe", "transcription"),
]
NATIVE_COUNT = {"anthropic", "gemini", "bedrock"}


def operations_config(listen: str, admin: str, fake: str) -> str:
    lines = [f"listen: {listen}", f"admin_listen: {admin}", "server: { drain_timeout: 2s }", "providers:"]
    lines += [f'  up-{p}: {{ protocol: {p}, base_url: "http://{fake}" }}' for p in PROTOCOLS]
    lines.append("models:")
    lines += [f"  lane-{p}: {{ provider: up-{p}, model: wire-{p} }}" for p in PROTOCOLS]
    lines += [f'  {n}: {{ provider: up-{p}, model: "{m}", operation: embed }}' for n, p, m, _ in EMBED_LANES]
    lines.append('  {}: {{ provider: up-{}, model: "{}", operation: embed }}'.format(*BEDROCK_COHERE_V4))
    lines += [f'  {n}: {{ provider: up-{p}, model: "{m}", operation: rerank }}' for n, p, m in RERANK_LANES]
    lines += [f"  {n}: {{ provider: up-openai, model: {m}, operation: {o} }}" for n, m, o in MEDIA_LANES]
    return "\n".join(lines) + "\n"


def spawn(args: list[str], log_path) -> subprocess.Popen:
    log = open(log_path, "wb")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """(fake, gateway): the vendor fake, and a gateway whose lanes reach it."""
    binary = os.environ["SWITCHYARD_BIN"]
    workdir = tmp_path_factory.mktemp("operations")
    fake = f"127.0.0.1:{free_port()}"
    fake_proc = spawn([binary, "mock-upstream", "--listen", fake], workdir / "fake.log")
    addr, admin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    (workdir / "switchyard.yaml").write_text(operations_config(addr, admin, fake))
    proc = spawn([binary, "serve", "--config", str(workdir / "switchyard.yaml")], workdir / "switchyard.log")
    deadline = time.monotonic() + 30
    while not (healthy(addr) and healthy(fake)):
        if proc.poll() is not None or fake_proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            stop(fake_proc)
            pytest.fail((workdir / "switchyard.log").read_text(errors="replace"))
        time.sleep(0.05)
    try:
        yield fake, addr
    finally:
        stop(proc)
        stop(fake_proc)


def openai_client(addr: str):
    import openai

    return openai.OpenAI(api_key="x", base_url=f"http://{addr}/v1", max_retries=0)


def genai_client(addr: str):
    from google import genai
    from google.genai import types

    options = types.HttpOptions(base_url=f"http://{addr}", api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key="x", http_options=options)


def bedrock_client(addr: str):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        endpoint_url=f"http://{addr}",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def close_to_float32(got: list[float], want: list[float]) -> bool:
    """The fake's values are exact in float32: base64 must not change them."""
    return [struct.unpack("<f", struct.pack("<f", v))[0] for v in got] == want


# -- embeddings ---------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_openai_embeddings_reach_every_embed_lane(sites, encoding):
    fake, gateway = sites
    targets = [(fake, "text-embedding-3-small", True)] + [(gateway, n, dims) for n, _, _, dims in EMBED_LANES]
    for addr, model, dims in targets:
        client = openai_client(addr)
        reply = client.embeddings.create(model=model, input=TEXTS, dimensions=4, encoding_format=encoding)
        got = []
        for item in reply.data:
            embedding = item.embedding
            if isinstance(embedding, str):
                raw = base64.b64decode(embedding)
                embedding = list(struct.unpack(f"<{len(raw) // 4}f", raw))
            got.append(embedding)
        want = [vector(t, 4 if dims else 8) for t in TEXTS]
        assert [item.index for item in reply.data] == [0, 1, 2], model
        assert got == want or all(close_to_float32(g, w) for g, w in zip(got, want)), model
        assert reply.usage.prompt_tokens == words(*TEXTS), model


def test_the_openai_sdks_default_base64_vectors_decode_to_the_lanes_floats(sites):
    _, gateway = sites
    for name, _, _, dims in EMBED_LANES:
        reply = openai_client(gateway).embeddings.create(model=name, input=TEXTS, dimensions=4)
        assert [item.embedding for item in reply.data] == [vector(t, 4 if dims else 8) for t in TEXTS], name


def test_google_genai_embeds_on_every_embed_lane(sites):
    from google.genai import types

    fake, gateway = sites
    config = types.EmbedContentConfig(output_dimensionality=4, task_type="RETRIEVAL_DOCUMENT")
    targets = [(fake, "gemini-embedding-001", True)] + [(gateway, n, dims) for n, _, _, dims in EMBED_LANES]
    for addr, model, dims in targets:
        client = genai_client(addr)  # kept: a client closes its connections when collected
        reply = client.models.embed_content(model=model, contents=TEXTS, config=config)
        assert [e.values for e in reply.embeddings] == [vector(t, 4 if dims else 8) for t in TEXTS], model


def test_cohere_embeds_on_every_embed_lane(sites):
    import cohere

    fake, gateway = sites
    targets = [(fake, "embed-v4.0", True)] + [(gateway, n, dims) for n, _, _, dims in EMBED_LANES]
    for addr, model, dims in targets:
        client = cohere.ClientV2(api_key="x", base_url=f"http://{addr}", max_retries=0)
        reply = client.embed(
            model=model, texts=TEXTS, input_type="search_query", embedding_types=["float", "base64"], output_dimension=4
        )
        want = [vector(t, 4 if dims else 8) for t in TEXTS]
        assert reply.embeddings.float_ == want, model
        decoded = [list(struct.unpack(f"<{len(base64.b64decode(b)) // 4}f", base64.b64decode(b))) for b in reply.embeddings.base64]
        assert decoded == want, model
        assert reply.meta.billed_units.input_tokens == words(*TEXTS), model


def test_boto3_invoke_model_embeds_with_titan_and_cohere_bodies(sites):
    fake, gateway = sites
    titan_targets = [(fake, "amazon.titan-embed-text-v2:0", True)] + [(gateway, n, dims) for n, _, _, dims in EMBED_LANES]
    for addr, model, dims in titan_targets:
        reply = bedrock_client(addr).invoke_model(modelId=model, body=json.dumps({"inputText": TEXTS[0], "dimensions": 4}))
        body = json.loads(reply["body"].read())
        assert body["embedding"] == vector(TEXTS[0], 4 if dims else 8), model
        assert body["inputTextTokenCount"] == words(TEXTS[0]), model
    cohere_targets = [(fake, "cohere.embed-english-v3")] + [(gateway, n) for n, _, _, _ in EMBED_LANES]
    for addr, model in cohere_targets:
        body = json.dumps({"texts": TEXTS, "input_type": "search_document"})
        reply = bedrock_client(addr).invoke_model(modelId=model, body=body, contentType="application/json")
        assert json.loads(reply["body"].read())["embeddings"] == [vector(t, 8) for t in TEXTS], model
        headers = reply["ResponseMetadata"]["HTTPHeaders"]
        assert int(headers["x-amzn-bedrock-input-token-count"]) == words(*TEXTS), model


def test_boto3_cohere_bodies_keep_their_types_and_sizes(sites):
    """A Cohere body naming its `embedding_types` is answered by type
    (`embeddings_by_type`), as Bedrock's Cohere models answer it, and its
    `output_dimension` reaches the lanes that take it (Embed v4 on Bedrock,
    Cohere's own): 256 values, not the model's whole size. Embed v3 refuses
    the key (the fake, as Bedrock does); through the gateway it is left out
    for v3 and reported."""
    from botocore.exceptions import ClientError

    fake, gateway = sites
    body = json.dumps({"texts": TEXTS, "input_type": "search_document", "embedding_types": ["float"], "output_dimension": 256})
    for addr, model in [(fake, BEDROCK_COHERE_V4[2]), (gateway, BEDROCK_COHERE_V4[0]), (gateway, "embed-cohere")]:
        reply = json.loads(bedrock_client(addr).invoke_model(modelId=model, body=body)["body"].read())
        assert reply["response_type"] == "embeddings_by_type", (model, reply)
        assert reply["embeddings"]["float"] == [vector(t, 256) for t in TEXTS], model
    with pytest.raises(ClientError) as refused:
        bedrock_client(fake).invoke_model(modelId="cohere.embed-english-v3", body=body)
    assert "output_dimension" in str(refused.value), refused.value
    raw = bedrock_client(gateway).invoke_model(modelId="embed-bedrock-cohere", body=body)
    assert json.loads(raw["body"].read())["embeddings"]["float"] == [vector(t, 8) for t in TEXTS]
    assert raw["ResponseMetadata"]["HTTPHeaders"].get("x-switchyard-dropped"), raw["ResponseMetadata"]["HTTPHeaders"]


def test_cohere_quantised_embeddings_reach_cohere_models_only(sites):
    """int8, Cohere's own form, between Cohere's API and its models on
    Bedrock both ways: the lane is asked for it and its vectors carried (the
    gateway refused it before). A lane that cannot make it (OpenAI's) gets
    floats only, reported, and a strict caller is refused."""
    import urllib.error
    import urllib.request

    import cohere

    fake, gateway = sites
    want = [int8(vector(t, 8)) for t in TEXTS]
    for addr, model in [(fake, "embed-v4.0"), (gateway, "embed-bedrock-cohere"), (gateway, "embed-cohere")]:
        client = cohere.ClientV2(api_key="x", base_url=f"http://{addr}", max_retries=0)
        reply = client.embed(model=model, texts=TEXTS, input_type="search_query", embedding_types=["int8", "float"])
        assert reply.embeddings.int8 == want, model
        assert reply.embeddings.float_ == [vector(t, 8) for t in TEXTS], model
    body = json.dumps({"texts": TEXTS, "input_type": "search_document", "embedding_types": ["int8"]})
    for addr, model in [(fake, "cohere.embed-english-v3"), (gateway, "embed-cohere"), (gateway, "embed-bedrock-cohere")]:
        reply = json.loads(bedrock_client(addr).invoke_model(modelId=model, body=body)["body"].read())
        assert (reply["response_type"], reply["embeddings"]) == ("embeddings_by_type", {"int8": want}), model

    def post(headers: dict[str, str]):
        data = json.dumps({"model": "embed-openai", "texts": TEXTS, "input_type": "search_query", "embedding_types": ["float", "int8"]})
        request = urllib.request.Request(
            f"http://{gateway}/v2/embed", data=data.encode(), headers={"content-type": "application/json", **headers}
        )
        return urllib.request.urlopen(request, timeout=10)

    with post({}) as answer:
        embeddings = json.loads(answer.read())["embeddings"]
        assert answer.headers.get("x-switchyard-dropped"), dict(answer.headers)
    assert embeddings == {"float": [vector(t, 8) for t in TEXTS]}
    with pytest.raises(urllib.error.HTTPError) as refused:
        post({"x-switchyard-strict": "1"})
    assert refused.value.code == 400


# -- rerank -------------------------------------------------------------------


def ranked(top_n: int) -> list[tuple[int, float]]:
    scores = sorted(((i, score(QUERY, d)) for i, d in enumerate(DOCUMENTS)), key=lambda p: (-p[1], p[0]))
    return scores[:top_n]


def test_cohere_reranks_on_every_rerank_lane(sites):
    import cohere

    fake, gateway = sites
    for addr, model in [(fake, "rerank-v3.5")] + [(gateway, n) for n, _, _ in RERANK_LANES]:
        v2 = cohere.ClientV2(api_key="x", base_url=f"http://{addr}", max_retries=0)
        reply = v2.rerank(model=model, query=QUERY, documents=DOCUMENTS, top_n=3)
        assert [(r.index, r.relevance_score) for r in reply.results] == ranked(3), model
        assert reply.meta.billed_units.search_units == 1, model
    for model in [n for n, _, _ in RERANK_LANES]:
        v1 = cohere.Client(api_key="x", base_url=f"http://{gateway}", max_retries=0)
        reply = v1.rerank(model=model, query=QUERY, documents=DOCUMENTS, top_n=2, return_documents=True)
        assert [(r.index, r.relevance_score) for r in reply.results] == ranked(2), model
        assert [r.document.text for r in reply.results] == [DOCUMENTS[i] for i, _ in ranked(2)], model


def test_boto3_invoke_model_reranks_on_every_rerank_lane(sites):
    fake, gateway = sites
    body = json.dumps({"query": QUERY, "documents": DOCUMENTS, "top_n": 3, "api_version": 2})
    for addr, model in [(fake, "cohere.rerank-v3-5:0")] + [(gateway, n) for n, _, _ in RERANK_LANES]:
        reply = bedrock_client(addr).invoke_model(modelId=model, body=body)
        results = json.loads(reply["body"].read())["results"]
        assert [(r["index"], r["relevance_score"]) for r in results] == ranked(3), model


# -- token counting -------------------------------------------------------------

SYSTEM = "be brief"
ASK = "hello there general kenobi"


def test_anthropic_counts_tokens_on_every_chat_lane(sites):
    import anthropic

    fake, gateway = sites
    direct = anthropic.Anthropic(api_key="x", base_url=f"http://{fake}", max_retries=0)
    counted = direct.messages.count_tokens(model="claude-sonnet-4-5", system=SYSTEM, messages=[{"role": "user", "content": ASK}])
    assert counted.input_tokens == words(SYSTEM, ASK)
    for protocol in PROTOCOLS:
        lane = f"lane-{protocol}"
        for client, model in [
            (anthropic.Anthropic(api_key="x", base_url=f"http://{gateway}", max_retries=0), lane),
            (anthropic.Anthropic(api_key="x", base_url=f"http://{gateway}/{lane}", max_retries=0), "ignored"),
        ]:
            raw = client.messages.with_raw_response.count_tokens(
                model=model, system=SYSTEM, messages=[{"role": "user", "content": ASK}]
            )
            counted = raw.parse()
            if protocol in NATIVE_COUNT:
                assert counted.input_tokens == words(SYSTEM, ASK), protocol
                assert raw.headers.get("x-switchyard-estimated") is None, protocol
            else:
                assert counted.input_tokens > 0, protocol
                assert raw.headers.get("x-switchyard-estimated") == "true", protocol


def test_google_genai_counts_tokens_on_every_chat_lane(sites):
    fake, gateway = sites
    direct = genai_client(fake)
    assert direct.models.count_tokens(model="gemini-2.5-flash", contents=ASK).total_tokens == words(ASK)
    client = genai_client(gateway)
    for protocol in PROTOCOLS:
        counted = client.models.count_tokens(model=f"lane-{protocol}", contents=ASK)
        if protocol in NATIVE_COUNT:
            assert counted.total_tokens == words(ASK), protocol
        else:
            assert counted.total_tokens > 0, protocol


def test_boto3_counts_tokens_on_every_chat_lane(sites):
    fake, gateway = sites
    converse = {"messages": [{"role": "user", "content": [{"text": ASK}]}], "system": [{"text": SYSTEM}]}
    assert bedrock_client(fake).count_tokens(modelId="wire", input={"converse": converse})["inputTokens"] == words(SYSTEM, ASK)
    for protocol in PROTOCOLS:
        reply = bedrock_client(gateway).count_tokens(modelId=f"lane-{protocol}", input={"converse": converse})
        if protocol in NATIVE_COUNT:
            assert reply["inputTokens"] == words(SYSTEM, ASK), protocol
        else:
            assert reply["inputTokens"] > 0, protocol
            assert reply["ResponseMetadata"]["HTTPHeaders"]["x-switchyard-estimated"] == "true", protocol


# -- OpenAI's own operations ----------------------------------------------------


def test_openai_media_operations(sites):
    fake, gateway = sites
    for addr, names in [
        (fake, {"moderation": "omni-moderation-latest", "image": "gpt-image-1", "tts": "gpt-4o-mini-tts", "stt": "gpt-4o-transcribe"}),
        (gateway, {"moderation": "moderation", "image": "image", "tts": "tts", "stt": "stt"}),
    ]:
        client = openai_client(addr)
        moderated = client.moderations.create(model=names["moderation"], input=["fine", "[mock:flag] not fine"])
        assert [r.flagged for r in moderated.results] == [False, True], addr
        images = client.images.generate(model=names["image"], prompt="a lighthouse", n=2)
        assert len(images.data) == 2 and base64.b64decode(images.data[0].b64_json).startswith(b"\x89PNG"), addr
        speech = client.audio.speech.create(model=names["tts"], voice="alloy", input="good evening")
        assert speech.content == b"ID3\x04good evening", addr
        audio = b"\x01" * 32_000
        text = client.audio.transcriptions.create(model=names["stt"], file=("clip.mp3", audio, "audio/mpeg"))
        # The fake says which model it was asked for: the gateway's lane's, not the caller's name.
        assert text.text == "32000 bytes of audio for gpt-4o-transcribe", addr
        translated = client.audio.translations.create(model=names["stt"], file=("clip.mp3", audio, "audio/mpeg"))
        assert translated.text.startswith("32000 bytes"), addr


def test_openai_models_list_says_each_operation(sites):
    _, gateway = sites
    models = {m.id: m for m in openai_client(gateway).models.list()}
    assert models["embed-titan"].operation == "embed"
    assert models["rerank-server"].operation == "rerank"
    assert models["stt"].operation == "transcription"
    assert models["lane-anthropic"].operation == "chat"
    assert openai_client(gateway).models.retrieve("tts").operation == "speech"


def test_google_genai_models_list_pages_through_chat_and_embed_entries(sites):
    _, gateway = sites
    from google.genai import types

    client = genai_client(gateway)
    listed = list(client.models.list(config=types.ListModelsConfig(page_size=3)))
    names = {m.name: m for m in listed}
    assert "models/embed-google" in names and "models/lane-openai" in names
    assert "embedContent" in names["models/embed-google"].supported_actions
    assert "generateContent" in names["models/lane-cohere"].supported_actions
    assert not any("rerank" in name for name in names), "a Gemini caller cannot rerank"
    assert len(listed) == len(PROTOCOLS) + len(EMBED_LANES) + 1  # and BEDROCK_COHERE_V4
