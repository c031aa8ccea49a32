//! Writing metric families with `prometheus-client`: the helpers every
//! scraped source (the request path's counters, governance's figures)
//! shares. A leaf: it knows no gateway state.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

/// Writes counter `name` with the series that are not zero.
pub fn encode_counters<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Vec<(&'static str, &'a str)>, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.filter(|(_, value)| *value > 0).peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        let family = metric.encode_family(&labels)?;
        ConstCounter::new(value).encode(family)?;
    }
    Ok(())
}

/// Writes gauge `name` with every series.
pub fn encode_gauges<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Vec<(&'static str, &'a str)>, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        let family = metric.encode_family(&labels)?;
        ConstGauge::new(value).encode(family)?;
    }
    Ok(())
}
