//! Consistency checks of machines.md ("A loader rejects unknown fields and checks: ...").

use super::Machine;

impl Machine {
    /// Check the invariants a machine must satisfy; the error names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.nodes.len();
        if n == 0 {
            return Err("`nodes` is empty: a machine needs at least one node".into());
        }
        if n > 255 {
            return Err(format!("{n} nodes: at most 255 are supported"));
        }
        if self.sockets == 0 {
            return Err("`sockets` must be at least 1".into());
        }
        if self.smt == 0 {
            return Err("`smt` must be at least 1".into());
        }
        if !is_positive(self.clock_ghz) {
            return Err(format!("`clock_ghz` = {} must be positive", self.clock_ghz));
        }
        if self.page_sizes.is_empty() || self.page_sizes.iter().any(|&p| p < 4096 || !p.is_power_of_two()) {
            return Err(format!("`page_sizes` = {:?}: need powers of two of at least 4096", self.page_sizes));
        }
        check_matrix_shape("latency_ns", &self.latency_ns, n)?;
        check_matrix_shape("slit", &self.slit, n)?;
        check_matrix_shape("hops", &self.hops, n)?;
        if let Some(c) = &self.latency_ns_contended {
            check_matrix_shape("latency_ns_contended", c, n)?;
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if node.socket >= self.sockets {
                return Err(format!("nodes[{i}].socket = {} is not below `sockets` = {}", node.socket, self.sockets));
            }
            if !is_non_negative(node.mem_bw_gbps) || (node.mem_bytes > 0 && node.mem_bw_gbps <= 0.0) {
                return Err(format!("nodes[{i}].mem_bw_gbps = {} must be positive on a node with memory", node.mem_bw_gbps));
            }
            if let Some(peak) = node.mem_peak_gbps {
                if node.mem_bw_gbps > peak {
                    return Err(format!("nodes[{i}].mem_bw_gbps = {} exceeds mem_peak_gbps = {peak}", node.mem_bw_gbps));
                }
            }
        }
        for s in 0..self.sockets {
            if !self.nodes.iter().any(|node| node.socket == s && node.cores > 0) {
                return Err(format!("socket {s} has no node with CPUs"));
            }
        }
        if self.memory_nodes().is_empty() {
            return Err("no node has memory".into());
        }
        for i in 0..n {
            if self.slit[i][i] != 10 {
                return Err(format!("slit[{i}][{i}] = {} must be 10", self.slit[i][i]));
            }
            if self.hops[i][i] != 0 {
                return Err(format!("hops[{i}][{i}] = {} must be 0", self.hops[i][i]));
            }
            for j in 0..n {
                if self.slit[i][j] != self.slit[j][i] {
                    return Err(format!("slit is not symmetric at [{i}][{j}]"));
                }
                if i != j && !(11..=254).contains(&self.slit[i][j]) {
                    return Err(format!("slit[{i}][{j}] = {} must lie in 11..=254", self.slit[i][j]));
                }
                if self.hops[i][j] != self.hops[j][i] {
                    return Err(format!("hops is not symmetric at [{i}][{j}]"));
                }
                if i != j && self.hops[i][j] == 0 {
                    return Err(format!("hops[{i}][{j}] = 0 off the diagonal"));
                }
            }
            let cpu_node = self.nodes[i].cores > 0;
            let row = &self.latency_ns[i];
            if cpu_node {
                let local = row[i];
                if !is_positive(local) {
                    return Err(format!("latency_ns[{i}][{i}] = {local} must be positive on a CPU node"));
                }
                for (j, &l) in row.iter().enumerate() {
                    if l < local {
                        return Err(format!("latency_ns[{i}][{j}] = {l} is below the local latency {local}"));
                    }
                }
            } else if row.iter().any(|&l| l != 0.0) {
                return Err(format!("latency_ns row {i} must be all 0.0: node {i} has no CPUs"));
            }
        }
        let locals: Vec<f64> = (0..n).filter(|&i| self.nodes[i].cores > 0).map(|i| self.latency_ns[i][i]).collect();
        if locals.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!("local latencies differ between CPU nodes: {locals:?}"));
        }
        check_hops_shortest_paths(&self.hops)?;
        for &io in &self.io_nodes {
            if io as usize >= n {
                return Err(format!("io_nodes names node {io}, but the machine has {n} nodes"));
            }
        }
        let cross_socket_direct = (0..n).any(|a| (0..n).any(|b| self.hops[a][b] == 1 && self.nodes[a].socket != self.nodes[b].socket));
        if cross_socket_direct && !is_positive(self.link_bw_gbps) {
            return Err("link_bw_gbps must be positive: the machine has cross-socket links".into());
        }
        if self.intra_socket_link_bw_gbps < 0.0 {
            return Err("intra_socket_link_bw_gbps must not be negative".into());
        }
        Ok(())
    }
}

fn check_matrix_shape<T>(name: &str, m: &[Vec<T>], n: usize) -> Result<(), String> {
    if m.len() != n {
        return Err(format!("`{name}` has {} rows; the machine has {n} nodes", m.len()));
    }
    for (i, row) in m.iter().enumerate() {
        if row.len() != n {
            return Err(format!("`{name}` row {i} has {} entries; the machine has {n} nodes", row.len()));
        }
    }
    Ok(())
}

/// `hops` must equal the shortest-path length over the pairs with `hops = 1` (BFS per node).
fn check_hops_shortest_paths(hops: &[Vec<u32>]) -> Result<(), String> {
    let n = hops.len();
    for s in 0..n {
        let mut dist = vec![u32::MAX; n];
        dist[s] = 0;
        let mut queue = std::collections::VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            for v in 0..n {
                if hops[u][v] == 1 && dist[v] == u32::MAX {
                    dist[v] = dist[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        for t in 0..n {
            if dist[t] != hops[s][t] {
                return Err(format!(
                    "hops[{s}][{t}] = {} but the shortest path over direct links is {}",
                    hops[s][t],
                    if dist[t] == u32::MAX { "unreachable".to_string() } else { dist[t].to_string() }
                ));
            }
        }
    }
    Ok(())
}

/// `x > 0`, false for NaN (which a plain negated comparison would let through).
fn is_positive(x: f64) -> bool {
    x > 0.0
}

fn is_non_negative(x: f64) -> bool {
    x >= 0.0
}
