//! A ready-made terminal progress display (feature `progress`).

use crate::run::Progress;
use std::io::Write;
use std::sync::Mutex;

/// An observer for [`run_observed`](crate::run_observed) that keeps one line on standard error
/// up to date: overall percentage over `n_chains` chains of `n_iter` iterations, then the
/// iteration, elapsed time and cost of the chain that reported last. Ends the line when every
/// chain is done.
pub fn terminal(n_iter: u64, n_chains: usize) -> impl Fn(&Progress<'_>) + Sync {
    let done = Mutex::new(vec![0u64; n_chains.max(1)]);
    move |p: &Progress<'_>| {
        let Ok(mut d) = done.lock() else { return };
        if let Some(slot) = d.get_mut(p.chain) {
            *slot = p.iteration;
        }
        let total: u64 = d.iter().sum();
        let all = n_iter.max(1) * d.len() as u64;
        let pct = 100.0 * total as f64 / all as f64;
        let width = 30usize;
        let filled = ((pct / 100.0) * width as f64) as usize;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {pct:5.1}%  chain {} at {}/{}  {:.1} s  {} datum gradients",
            "#".repeat(filled.min(width)),
            " ".repeat(width - filled.min(width)),
            p.chain,
            p.iteration,
            p.n_iter,
            p.elapsed.as_secs_f64(),
            p.cost.datum_gradients
        );
        if total >= all {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    }
}
