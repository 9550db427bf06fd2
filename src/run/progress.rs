//! A ready-made terminal progress display (always built; the former `progress` feature is a
//! no-op kept for compatibility).

use crate::run::observe::{Control, Observer, Progress};
use std::io::Write;
use std::sync::Mutex;

/// An [`Observer`] that keeps one line on standard error up to date: the run's overall
/// percentage, its rate in iterations per second and the estimated time left, then the
/// iteration and cost of the chain that reported last. Every figure comes from the run itself
/// (no settings to repeat). Ends the line when every chain is done. Never stops a run.
///
/// ```
/// use sgmcmc::prelude::*;
/// let model = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 7).unwrap();
/// let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100)).unwrap();
/// let display = sgmcmc::progress::Terminal::new(1_000);
/// Runner::new(&model, &sgld).start(&[0.0, 0.0]).settings(RunSettings::default()).observers(&[&display]).run().unwrap();
/// ```
#[derive(Debug, Default)]
pub struct Terminal {
    interval: u64,
    done: Mutex<Vec<u64>>,
}

impl Terminal {
    /// A display refreshed every `interval` iterations of each chain.
    pub fn new(interval: u64) -> Self {
        Terminal { interval: interval.max(1), done: Mutex::new(Vec::new()) }
    }

    fn show(&self, p: &Progress<'_>) {
        let Ok(mut d) = self.done.lock() else { return };
        if d.len() < p.n_chains {
            d.resize(p.n_chains, 0);
        }
        if let Some(slot) = d.get_mut(p.chain) {
            *slot = p.iteration;
        }
        let total: u64 = d.iter().sum();
        let all = p.n_iter.max(1) * d.len() as u64;
        let frac = total as f64 / all as f64;
        let secs = p.run_elapsed.as_secs_f64();
        let rate = if secs > 0.0 { total as f64 / secs } else { 0.0 };
        let eta = if rate > 0.0 { (all - total.min(all)) as f64 / rate } else { f64::NAN };
        let width = 30usize;
        let filled = ((frac * width as f64) as usize).min(width);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {:5.1}%  {:.3e} it/s  ETA {:.0} s  chain {} at {}/{}  {} datum gradients ",
            "#".repeat(filled),
            " ".repeat(width - filled),
            100.0 * frac,
            rate,
            eta,
            p.chain,
            p.iteration,
            p.n_iter,
            p.cost.datum_gradients
        );
        if total >= all {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    }
}

impl Observer for Terminal {
    fn observe(&self, p: &Progress<'_>) -> Control {
        self.show(p);
        Control::Continue
    }

    fn finish(&self, p: &Progress<'_>) {
        self.show(p);
    }

    fn interval(&self) -> u64 {
        self.interval
    }
}
