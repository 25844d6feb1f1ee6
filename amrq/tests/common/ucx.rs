//! What the UCX tests share: whether they can run, and the UCX settings that take the
//! network path inside one host.

/// The UCX settings of a test job (tcp on the loopback device), or `None` where UCX
/// cannot be used: then `test` says it was skipped, unless `AMRQ_REQUIRE_UCX` is set
/// (as in CI, which installs UCX), where a skip would hide a broken install: it fails.
pub fn loopback_or_skip(test: &str) -> Option<Vec<(String, String)>> {
    if let Err(why) = amrq::conduit::ucx::available() {
        if std::env::var_os("AMRQ_REQUIRE_UCX").is_some() {
            panic!("AMRQ_REQUIRE_UCX is set and UCX cannot be used: {why}");
        }
        eprintln!("{test}: skipped: {why}");
        return None;
    }
    Some(
        [("TLS", "tcp"), ("NET_DEVICES", "lo")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
    )
}
