//! Outbound HTTP connections (JWKS key sets, event webhooks) on the TLS stack the AWS SDK
//! already builds: rustls with aws-lc-rs.

use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;

/// A connector for `https` URLs (the system's root certificates) or, with `https` false, for
/// plain `http` URLs only.
pub fn connector(https: bool) -> Result<HttpsConnector<HttpConnector>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    Ok(if https {
        builder
            .with_provider_and_native_roots(provider)
            .map_err(|e| format!("no TLS root certificates: {e}"))?
            .https_only()
            .enable_http1()
            .build()
    } else {
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        builder
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .build()
    })
}

/// Whether a server-side request to `ip` would reach the server's own network rather than a
/// public service: loopback, unspecified, private (RFC 1918, unique local), shared (CGNAT,
/// where some clouds keep metadata services), link-local (169.254.169.254, the metadata
/// address of most clouds), multicast and broadcast addresses, and IPv6 forms that embed any
/// of these (IPv4-mapped, NAT64, 6to4). `fd00:ec2::254`, EC2's IPv6 metadata address, is
/// unique local.
pub fn is_internal(ip: std::net::IpAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr};
    fn v4(ip: Ipv4Addr) -> bool {
        let [a, b, ..] = ip.octets();
        ip.is_loopback()
            || ip.is_private()
            || ip.is_link_local()
            || ip.is_unspecified()
            || ip.is_broadcast()
            || ip.is_multicast()
            || a == 0
            || (a == 100 && (64..128).contains(&b))
            || (a == 192 && b == 0 && ip.octets()[2] == 0)
            || a >= 240
    }
    match ip {
        IpAddr::V4(ip) => v4(ip),
        IpAddr::V6(ip) => {
            let segments = ip.segments();
            let embedded = |hi: u16, lo: u16| {
                Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)
            };
            if let Some(mapped) = ip.to_ipv4_mapped() {
                return v4(mapped);
            }
            // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return v4(embedded(segments[6], segments[7]));
            }
            if segments[0] == 0x2002 {
                return v4(embedded(segments[1], segments[2]));
            }
            ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_multicast()
                // Unique local fc00::/7, link-local fe80::/10, site-local fec0::/10.
                || (segments[0] & 0xfe00) == 0xfc00
                || (segments[0] & 0xffc0) == 0xfe80
                || (segments[0] & 0xffc0) == 0xfec0
                // IPv4-compatible ::a.b.c.d (deprecated).
                || (segments[..6] == [0; 6] && v4(embedded(segments[6], segments[7])))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_internal;

    #[test]
    fn internal_addresses_are_recognised() {
        for internal in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.0.1",
            "169.254.169.254",
            "100.100.100.200",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in [
            "52.216.1.1",
            "203.0.113.7",
            "8.8.8.8",
            "2600:1f18::1",
            "::ffff:52.216.1.1",
        ] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }
}
