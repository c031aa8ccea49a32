"""Image generation across protocols through the official SDKs: the
`openai` SDK's `images.generate` reaches Imagen on a Gemini lane (`:predict`)
and Nova Canvas and Stable Image Ultra on Bedrock lanes (`InvokeModel`,
signed with SigV4); `google-genai`'s `models.generate_images` and boto3's
`invoke_model` with Nova and Stability bodies reach an OpenAI lane. The
lanes are the vendor fake (`switchyard mock-upstream`) over HTTP, which
refuses what each vendor refuses (more images than a call makes, members it
does not know), so a request the gateway writes wrong is the vendor's 400.
Every image comes back as base64 PNG bytes, and the ledger bills each
request per image the lane made, at the rate card's price.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import ADMIN_TOKEN, admin_api, free_port, healthy

PNG = b"\x89PNG"
# Lane, wire model, provider, price per image.
LANES = [
    ("image-openai", "gpt-image-1", "up-openai", 0.042),
    ("image-imagen", "imagen-4.0-generate-001", "up-gemini", 0.04),
    ("image-nova", "amazon.nova-canvas-v1:0", "up-bedrock", 0.08),
    ("image-stability", "stability.stable-image-ultra-v1:1", "up-bedrock", 0.14),
]


def images_config(listen: str, admin: str, fake: str, db: str) -> str:
    aws = "aws: { access_key_id: AKIDEXAMPLE, secret_access_key: wJalrXUtnFEMI, region: us-east-1 }"
    lines = [
        f"listen: {listen}",
        f"admin_listen: {admin}",
        f"admin: {{ tokens: [{ADMIN_TOKEN}] }}",
        "server: { drain_timeout: 2s }",
        "auth: { mode: keys }",
        "governance: { ledger_flush_interval: 20ms }",
        f"storage: {{ sqlite_path: {db} }}",
        "providers:",
        f'  up-openai: {{ protocol: openai, base_url: "http://{fake}" }}',
        f'  up-gemini: {{ protocol: gemini, base_url: "http://{fake}" }}',
        f'  up-bedrock: {{ protocol: bedrock, base_url: "http://{fake}", {aws} }}',
        "models:",
    ]
    lines += [f'  {n}: {{ provider: {p}, model: "{m}", operation: image }}' for n, m, p, _ in LANES]
    lines.append("rate_card:")
    lines += [f"  {n}: {{ per_image_usd: {price} }}" for n, _, _, price in LANES]
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
def site(tmp_path_factory):
    """(fake, gateway, admin): the vendor fake, and a governed gateway whose
    image lanes reach it."""
    binary = os.environ["SWITCHYARD_BIN"]
    workdir = tmp_path_factory.mktemp("images")
    fake = f"127.0.0.1:{free_port()}"
    fake_proc = spawn([binary, "mock-upstream", "--listen", fake], workdir / "fake.log")
    addr, admin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    config = images_config(addr, admin, fake, str(workdir / "switchyard.db"))
    (workdir / "switchyard.yaml").write_text(config)
    proc = spawn([binary, "serve", "--config", str(workdir / "switchyard.yaml")], workdir / "switchyard.log")
    deadline = time.monotonic() + 30
    while not (healthy(addr) and healthy(fake)):
        if proc.poll() is not None or fake_proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            stop(fake_proc)
            pytest.fail((workdir / "switchyard.log").read_text(errors="replace"))
        time.sleep(0.05)
    try:
        yield fake, addr, admin
    finally:
        stop(proc)
        stop(fake_proc)


def new_key(admin: str, name: str) -> dict:
    return admin_api(admin, "POST", "/api/v1/admin/keys", {"name": name, "issue_aws_credential": True})


def rows(admin: str, key_id: str, n: int) -> list[dict]:
    """The key's ledger rows, once there are `n`."""
    deadline = time.monotonic() + 10
    while True:
        data = admin_api(admin, "GET", f"/api/v1/admin/requests?key={key_id}")["data"]
        if len(data) >= n or time.monotonic() > deadline:
            return data
        time.sleep(0.05)


def openai_client(addr: str, key: str):
    import openai

    return openai.OpenAI(api_key=key, base_url=f"http://{addr}/v1", max_retries=0)


def genai_client(addr: str, key: str):
    """google-genai makes images only in Vertex AI mode (3.6: "not in Gemini
    Developer API mode"): express mode, an API key and no project, which
    asks `/v1beta1/publishers/google/models/{model}:predict`."""
    from google import genai
    from google.genai import types

    options = types.HttpOptions(base_url=f"http://{addr}", retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(vertexai=True, api_key=key, http_options=options)


def bedrock_client(addr: str, key: dict):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        endpoint_url=f"http://{addr}",
        region_name="us-east-1",
        aws_access_key_id=key["aws_access_key_id"],
        aws_secret_access_key=key["aws_secret_access_key"],
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def test_the_fake_answers_and_refuses_as_the_vendors_do(site):
    """Each SDK against the fake directly: its replies are ones the SDK
    reads, and it refuses what the vendor refuses."""
    import openai
    from google.genai import errors, types
    from botocore.exceptions import ClientError

    fake, _, _ = site
    made = openai_client(fake, "x").images.generate(model="gpt-image-1", prompt="a lighthouse", n=2)
    assert len(made.data) == 2 and base64.b64decode(made.data[0].b64_json).startswith(PNG)
    with pytest.raises(openai.BadRequestError):
        openai_client(fake, "x").images.generate(model="dall-e-3", prompt="a lighthouse", n=2)
    imagen = genai_client(fake, "x")
    config = types.GenerateImagesConfig(number_of_images=2, aspect_ratio="16:9")
    reply = imagen.models.generate_images(model="imagen-4.0-generate-001", prompt="a lighthouse", config=config)
    assert [i.image.image_bytes[:4] for i in reply.generated_images] == [PNG, PNG]
    with pytest.raises(errors.ClientError):
        imagen.models.generate_images(
            model="imagen-4.0-generate-001", prompt="a lighthouse", config=types.GenerateImagesConfig(number_of_images=5)
        )
    bedrock = bedrock_client(fake, {"aws_access_key_id": "x", "aws_secret_access_key": "x"})
    too_many = {"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a lighthouse"}, "imageGenerationConfig": {"numberOfImages": 6}}
    with pytest.raises(ClientError) as refused:
        bedrock.invoke_model(modelId="amazon.nova-canvas-v1:0", body=json.dumps(too_many))
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError):
        bedrock.invoke_model(modelId="stability.stable-image-ultra-v1:1", body=json.dumps({"prompt": "x", "n": 2}))


def test_openai_images_reach_imagen_and_bedrock_lanes_billed_per_image(site):
    _, addr, admin = site
    key = new_key(admin, "openai-images")
    client = openai_client(addr, key["key"])
    asked = {"image-imagen": 6, "image-nova": 7, "image-stability": 2}
    for lane, n in asked.items():
        made = client.images.generate(model=lane, prompt="a lighthouse at dusk", n=n, size="1024x1024")
        assert len(made.data) == n, lane
        assert all(base64.b64decode(image.b64_json).startswith(PNG) for image in made.data), lane
    # A URL cannot come from a base64-only lane: base64 comes back, and the header says so.
    raw = client.images.with_raw_response.generate(model="image-nova", prompt="a fox", response_format="url", quality="hd")
    assert raw.headers["x-switchyard-dropped"] == "quality, response_format"
    assert base64.b64decode(raw.parse().data[0].b64_json).startswith(PNG)
    # ... and under strict translation it is refused, naming what would be lost.
    import openai

    with pytest.raises(openai.BadRequestError) as refused:
        client.images.generate(
            model="image-imagen", prompt="a fox", response_format="url", extra_headers={"x-switchyard-strict": "1"}
        )
    assert "response_format" in str(refused.value)
    ledger = rows(admin, key["id"], len(asked) + 2)
    prices = {n: price for n, _, _, price in LANES}
    for lane, n in asked.items():
        (row,) = [r for r in ledger if r["lane"] == lane and r["units"] == n]
        assert row["operation"] == "image", row
        assert abs(row["usd"] - n * prices[lane]) < 1e-9, row


def test_google_genai_and_boto3_image_bodies_reach_an_openai_lane(site):
    from google.genai import types

    _, addr, admin = site
    key = new_key(admin, "vendor-images")
    config = types.GenerateImagesConfig(number_of_images=3, aspect_ratio="16:9")
    client = genai_client(addr, key["key"])  # kept: a client dropped closes its connection pool
    reply = client.models.generate_images(model="image-openai", prompt="a fox", config=config)
    assert [i.image.image_bytes[:4] for i in reply.generated_images] == [PNG] * 3
    bedrock = bedrock_client(addr, key)
    nova = {"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a fox", "negativeText": "rain"},
            "imageGenerationConfig": {"numberOfImages": 2, "width": 1024, "height": 1024}}
    answer = bedrock.invoke_model(modelId="image-openai", body=json.dumps(nova))
    body = json.loads(answer["body"].read())
    assert [base64.b64decode(i)[:4] for i in body["images"]] == [PNG, PNG] and body["error"] is None
    # OpenAI has no negative prompt: said in the header.
    assert answer["ResponseMetadata"]["HTTPHeaders"]["x-switchyard-dropped"] == "negative_prompt"
    answer = bedrock.invoke_model(modelId="image-openai", body=json.dumps({"prompt": "a fox", "aspect_ratio": "1:1"}))
    body = json.loads(answer["body"].read())
    assert len(body["images"]) == 1 and body["finish_reasons"] == [None]
    ledger = rows(admin, key["id"], 3)
    assert sorted(r["units"] for r in ledger) == [1, 2, 3]
    assert abs(sum(r["usd"] for r in ledger) - 6 * 0.042) < 1e-9
