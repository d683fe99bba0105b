//! Which address a request comes from (OWASP: trust forwarded headers only from known
//! proxies). The TCP peer is the client unless it is a trusted proxy (`--trusted-proxy`);
//! then the client is the rightmost `X-Forwarded-For` hop that is not itself trusted, since
//! every hop to the left of a trusted proxy's entry was written by whoever sent the request
//! and may be forged.

use std::net::IpAddr;
use std::str::FromStr;

/// An IP network: an address and a prefix length (`10.0.0.0/8`, `::1/128`, or a bare address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    /// Parses `ADDR` or `ADDR/PREFIX`; the error names what is wrong, in one line.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or CIDR (e.g. 10.0.0.0/8)"))?;
        let addr = canonical(addr);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Cidr {
    /// Whether `ip` is inside this network (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`; any other address unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// One `X-Forwarded-For` entry as an address: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1` or
/// `[2001:db8::1]:443`; None for anything else (`unknown`, garbage).
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Some(rest) = hop.strip_prefix('[') {
        return rest
            .split_once(']')
            .and_then(|(a, _)| a.parse().ok())
            .map(canonical);
    }
    hop.rsplit_once(':')
        .and_then(|(a, _)| a.parse::<std::net::Ipv4Addr>().ok())
        .map(IpAddr::V4)
}

/// The client address of a request: `peer` (the TCP peer) unless it is in `trusted`; then
/// the rightmost hop of `forwarded_for` (the `X-Forwarded-For` values in header order, each
/// a comma-separated list) that is not in `trusted`. A malformed hop stops the walk: the
/// last trusted address before it is the answer, never something the client wrote.
/// None when the peer is unknown.
pub fn client_ip(peer: Option<IpAddr>, forwarded_for: &[&str], trusted: &[Cidr]) -> Option<IpAddr> {
    let peer = canonical(peer?);
    let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
    if !is_trusted(peer) {
        return Some(peer);
    }
    let mut client = peer;
    for hop in forwarded_for
        .iter()
        .flat_map(|v| v.split(','))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let Some(ip) = parse_hop(hop) else {
            break;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    Some(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn cidrs_parse_and_match() {
        let n: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("10.200.1.1")));
        assert!(!n.contains(ip("11.0.0.1")));
        assert!(n.contains(ip("::ffff:10.0.0.1")), "mapped IPv4 is IPv4");
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::5")) && !v6.contains(ip("2001:db9::1")));
        assert!("0.0.0.0/0".parse::<Cidr>().unwrap().contains(ip("8.8.8.8")));
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "example.com",
            "10.0.0.0/x",
            "1.2.3",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn forwarded_for_counts_only_from_a_trusted_peer() {
        let trusted = nets(&["10.0.0.0/8"]);
        // An untrusted peer's header is ignored.
        assert_eq!(
            client_ip(Some(ip("203.0.113.9")), &["1.1.1.1"], &trusted),
            Some(ip("203.0.113.9"))
        );
        // Behind the proxy: the rightmost untrusted hop, not the forged leftmost one.
        assert_eq!(
            client_ip(
                Some(ip("10.0.0.2")),
                &["6.6.6.6, 198.51.100.7", "10.0.0.3"],
                &trusted
            ),
            Some(ip("198.51.100.7"))
        );
        // Ports and brackets are tolerated.
        assert_eq!(
            client_ip(Some(ip("10.0.0.2")), &["[2001:db8::7]:443"], &trusted),
            Some(ip("2001:db8::7"))
        );
        assert_eq!(
            client_ip(Some(ip("10.0.0.2")), &["198.51.100.7:5000"], &trusted),
            Some(ip("198.51.100.7"))
        );
        // Garbage stops the walk at the last trusted hop; no header: the proxy itself.
        assert_eq!(
            client_ip(Some(ip("10.0.0.2")), &["1.1.1.1, nonsense"], &trusted),
            Some(ip("10.0.0.2"))
        );
        assert_eq!(
            client_ip(Some(ip("10.0.0.2")), &[], &trusted),
            Some(ip("10.0.0.2"))
        );
        assert_eq!(client_ip(None, &["1.1.1.1"], &trusted), None);
    }
}
