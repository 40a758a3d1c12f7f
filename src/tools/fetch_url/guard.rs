//! The SSRF guard: which URLs and which IP addresses `fetch_url` may contact.
//!
//! [`check_url`] accepts only `http`/`https` URLs without userinfo and with a host; the WHATWG
//! parser of the `url` crate has already turned decimal, octal, hex and shortened IPv4 forms
//! (`2130706433`, `0177.0.0.1`, `0x7f000001`, `127.1`) into the address they name, so a literal
//! IP is judged as an IP. [`AddressPolicy`] judges every address before a connection: IPv4 by a
//! table of special-purpose ranges, IPv6 by allowing only global unicast (`2000::/3`) minus its
//! special ranges, and IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4)
//! by the embedded address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use super::FetchError;

/// IPv4 ranges that are never contacted, with the reason given to the model.
const FORBIDDEN_V4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "unspecified / this-network"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private"),
    (Ipv4Addr::new(100, 64, 0, 0), 10, "carrier-grade NAT"),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "link-local / cloud metadata",
    ),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private"),
    (Ipv4Addr::new(192, 0, 0, 0), 24, "IETF protocol assignments"),
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation"),
    (Ipv4Addr::new(192, 88, 99, 0), 24, "6to4 relay anycast"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking"),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved / broadcast"),
];

/// IPv6 ranges inside `2000::/3` that are never contacted.
const FORBIDDEN_V6: &[(Ipv6Addr, u8, &str)] = &[
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        "IETF protocol assignments (Teredo, ORCHID)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "documentation",
    ),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        "documentation",
    ),
];

/// Decides whether an IP address may be contacted.
///
/// The default allows only publicly routable addresses. Tests add explicit exceptions with
/// `allowing` so they can talk to a server on loopback.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    exceptions: Vec<IpAddr>,
}

impl AddressPolicy {
    /// The production policy: public addresses only.
    pub fn public_only() -> Self {
        Self::default()
    }

    /// A policy that also allows exactly `addresses` (for tests against a local server).
    #[cfg(test)]
    pub(crate) fn allowing(addresses: Vec<IpAddr>) -> Self {
        Self {
            exceptions: addresses,
        }
    }

    /// `Ok` if `ip` may be contacted, else the reason it may not.
    pub fn check(&self, ip: IpAddr) -> Result<(), &'static str> {
        if self.exceptions.contains(&ip) {
            return Ok(());
        }
        match ip {
            IpAddr::V4(v4) => check_v4(v4),
            IpAddr::V6(v6) => check_v6(v6),
        }
    }
}

fn check_v4(ip: Ipv4Addr) -> Result<(), &'static str> {
    let bits = u32::from(ip);
    for (network, prefix, reason) in FORBIDDEN_V4 {
        let mask = u32::MAX << (32 - u32::from(*prefix));
        if bits & mask == u32::from(*network) & mask {
            return Err(reason);
        }
    }
    Ok(())
}

fn check_v6(ip: Ipv6Addr) -> Result<(), &'static str> {
    let bits = u128::from(ip);
    if ip.is_unspecified() {
        return Err("unspecified");
    }
    if ip.is_loopback() {
        return Err("loopback");
    }
    // IPv4-mapped `::ffff:a.b.c.d` and the deprecated IPv4-compatible `::a.b.c.d`.
    if bits >> 32 == 0xffff || bits >> 32 == 0 {
        return check_v4(Ipv4Addr::from(bits as u32)).map_err(|_| "IPv4 embedded in IPv6");
    }
    // NAT64 well-known prefix `64:ff9b::/96`.
    if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        return check_v4(Ipv4Addr::from(bits as u32)).map_err(|_| "IPv4 embedded in NAT64");
    }
    // 6to4 `2002:AABB:CCDD::/48` carries the IPv4 address AA.BB.CC.DD.
    if bits >> 112 == 0x2002 {
        return check_v4(Ipv4Addr::from((bits >> 80) as u32)).map_err(|_| "IPv4 embedded in 6to4");
    }
    if bits >> 125 != 0b001 {
        return Err(match bits >> 120 {
            0xff => "multicast",
            0xfc | 0xfd => "unique local",
            0xfe if (bits >> 118) & 0b11 == 0b10 => "link-local",
            _ => "reserved (not global unicast)",
        });
    }
    for (network, prefix, reason) in FORBIDDEN_V6 {
        let mask = u128::MAX << (128 - u32::from(*prefix));
        if bits & mask == u128::from(*network) & mask {
            return Err(reason);
        }
    }
    Ok(())
}

/// Where one hop goes: what [`check_url`] extracted from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A literal IP address, contacted without DNS.
    Ip(IpAddr),
    /// A domain name that must be resolved and checked.
    Domain(String),
}

/// Parses `raw` and refuses what is not a plain `http`/`https` URL with a host.
pub fn parse_url(raw: &str) -> Result<Url, FetchError> {
    Url::parse(raw.trim()).map_err(|error| FetchError::InvalidUrl {
        url: raw.chars().take(200).collect(),
        error,
    })
}

/// Checks scheme, userinfo and host of `url` and names its target; literal IPs are checked
/// against `policy` here, domain names after resolution.
pub fn check_url(url: &Url, policy: &AddressPolicy) -> Result<Target, FetchError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(FetchError::UnsupportedScheme {
            scheme: url.scheme().to_owned(),
        });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(FetchError::Userinfo);
    }
    let target = match url.host() {
        None => return Err(FetchError::NoHost),
        Some(Host::Ipv4(ip)) => Target::Ip(IpAddr::V4(ip)),
        Some(Host::Ipv6(ip)) => Target::Ip(IpAddr::V6(ip)),
        Some(Host::Domain(domain)) => {
            let name = domain.trim_end_matches('.').to_ascii_lowercase();
            if name == "localhost" || name.ends_with(".localhost") {
                return Err(FetchError::ForbiddenHost { host: name });
            }
            Target::Domain(name)
        }
    };
    if let Target::Ip(ip) = target {
        policy
            .check(ip)
            .map_err(|reason| FetchError::ForbiddenAddress {
                host: ip.to_string(),
                ip,
                reason,
            })?;
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ip: &str, allowed: bool) {
        let parsed: IpAddr = ip.parse().unwrap();
        let res = AddressPolicy::public_only().check(parsed);
        assert_eq!(res.is_ok(), allowed, "{ip}: {res:?}");
    }

    #[test]
    fn address_table() {
        for (ip, allowed) in [
            ("93.184.215.14", true),
            ("8.8.8.8", true),
            ("1.1.1.1", true),
            ("127.0.0.1", false),
            ("127.255.255.254", false),
            ("10.1.2.3", false),
            ("172.16.0.1", false),
            ("172.31.255.255", false),
            ("172.32.0.1", true),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("100.127.255.255", false),
            ("100.128.0.1", true),
            ("0.0.0.0", false),
            ("255.255.255.255", false),
            ("224.0.0.1", false),
            ("192.0.2.1", false),
            ("198.18.0.1", false),
            ("2606:4700:4700::1111", true),
            ("::", false),
            ("::1", false),
            ("fe80::1", false),
            ("fc00::1", false),
            ("fd12:3456::1", false),
            ("ff02::1", false),
            ("fec0::1", false),
            ("2001:db8::1", false),
            ("2001:0::1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:10.0.0.1", false),
            ("::ffff:8.8.8.8", true),
            ("::127.0.0.1", false),
            ("64:ff9b::a9fe:a9fe", false),
            ("64:ff9b::808:808", true),
            ("2002:7f00:1::1", false),
            ("2002:a9fe:a9fe::1", false),
            ("2002:808:808::1", true),
            ("100::1", false),
        ] {
            check(ip, allowed);
        }
    }

    #[test]
    fn url_parser_normalizes_ipv4_forms() {
        for raw in [
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f000001/",
            "http://0x7f.0.0.1/",
            "http://127.1/",
            "http://127.0.1/",
            "http://017700000001/",
        ] {
            let url = parse_url(raw).unwrap();
            assert_eq!(
                url.host(),
                Some(Host::Ipv4(Ipv4Addr::LOCALHOST)),
                "{raw} parsed as {url}"
            );
        }
    }

    #[test]
    fn exceptions_allow_only_the_listed_address() {
        let policy = AddressPolicy::allowing(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        assert!(policy.check(IpAddr::V4(Ipv4Addr::LOCALHOST)).is_ok());
        assert!(
            policy
                .check(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
                .is_err()
        );
    }
}
