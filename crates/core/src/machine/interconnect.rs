//! Directed interconnect links and routes, derived from a machine's `hops` matrix
//! (docs/machines.md, "Interconnect model").

use super::{LinkSharing, Machine};
use crate::ids::NodeId;

pub type LinkId = u16;

/// One capacity-limited direction of a link (or of a shared socket-pair link).
#[derive(Clone, Debug, PartialEq)]
pub struct LinkInfo {
    /// Human-readable name, e.g. `0->1` or `socket0->socket1`.
    pub name: String,
    pub capacity_gbps: f64,
}

/// Links and the route of every node pair as a list of directed link ids. Pairs inside one
/// socket with `intra_socket_link_bw_gbps = 0` cross no limited link, so their route may be
/// shorter than their hop count.
#[derive(Clone, Debug)]
pub struct Interconnect {
    pub links: Vec<LinkInfo>,
    /// `routes[from * n + to]`: directed links data crosses flowing from `from` to `to`.
    routes: Vec<Vec<LinkId>>,
    n: usize,
}

impl Interconnect {
    pub fn build(m: &Machine) -> Interconnect {
        let n = m.nodes.len();
        let mut links: Vec<LinkInfo> = Vec::new();
        // Directed direct-pair link id, or None when not limited.
        let mut direct: Vec<Option<LinkId>> = vec![None; n * n];
        let mut socket_links: Vec<((u32, u32), LinkId)> = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a == b || m.hops[a][b] != 1 {
                    continue;
                }
                let (sa, sb) = (m.nodes[a].socket, m.nodes[b].socket);
                let narrow = a > b; // the a<b direction is full, b->a narrow
                let id = if sa == sb {
                    if m.intra_socket_link_bw_gbps <= 0.0 {
                        continue;
                    }
                    links.push(LinkInfo { name: format!("{a}->{b}"), capacity_gbps: m.intra_socket_link_bw_gbps });
                    (links.len() - 1) as LinkId
                } else {
                    let cap = if narrow { m.link_bw_narrow_gbps.unwrap_or(m.link_bw_gbps) } else { m.link_bw_gbps };
                    match m.link_sharing {
                        LinkSharing::NodePair => {
                            links.push(LinkInfo { name: format!("{a}->{b}"), capacity_gbps: cap });
                            (links.len() - 1) as LinkId
                        }
                        LinkSharing::SocketPair => {
                            if let Some(&(_, id)) = socket_links.iter().find(|(k, _)| *k == (sa, sb)) {
                                id
                            } else {
                                let cap = if sa > sb { m.link_bw_narrow_gbps.unwrap_or(m.link_bw_gbps) } else { m.link_bw_gbps };
                                links.push(LinkInfo { name: format!("socket{sa}->socket{sb}"), capacity_gbps: cap });
                                let id = (links.len() - 1) as LinkId;
                                socket_links.push(((sa, sb), id));
                                id
                            }
                        }
                    }
                };
                direct[a * n + b] = Some(id);
            }
        }
        let mut routes = vec![Vec::new(); n * n];
        for from in 0..n {
            for to in 0..n {
                let mut path = Vec::new();
                let mut cur = from;
                while cur != to {
                    let h = m.hops[cur][to];
                    let next = if h == 1 {
                        to
                    } else {
                        // Lowest-numbered neighbour one hop closer (docs/machines.md, routing rule).
                        (0..n).find(|&k| m.hops[cur][k] == 1 && m.hops[k][to] == h - 1).expect("validated hops are shortest paths")
                    };
                    if let Some(id) = direct[cur * n + next] {
                        path.push(id);
                    }
                    cur = next;
                }
                routes[from * n + to] = path;
            }
        }
        Interconnect { links, routes, n }
    }

    /// Directed links crossed by data flowing from node `from` to node `to`.
    pub fn route(&self, from: NodeId, to: NodeId) -> &[LinkId] {
        &self.routes[from as usize * self.n + to as usize]
    }
}
