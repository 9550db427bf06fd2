//! HAMCMC on the block-scheduled chain: warm-up, pairs and the block-constant L-BFGS step.

use crate::error::Result;
use crate::mf::engine::Engine;
use crate::mf::fabric::Fabric;
use crate::mf::worker::{BAD_GRADIENT, HamRing, OK, Worker, Wv, all_finite};
use crate::numeric::lbfgs::{Admitted, PairRing, PairSpace};
use crate::numeric::linalg::dot;
use crate::samplers::hamcmc::HamcmcSchedule;
use crate::samplers::{HamcmcSettings, hamcmc_update};

/// The workers' vectors as one L-BFGS space: elementwise operations on every local worker's
/// slice, dot products summed over all workers (in worker order) by the fabric.
impl<F: Fabric> PairSpace for Engine<'_, F> {
    type V = Wv;

    fn s(&self, slot: usize) -> Wv {
        Wv::S(slot)
    }

    fn y(&self, slot: usize) -> Wv {
        Wv::Y(slot)
    }

    fn bs(&self, slot: usize) -> Wv {
        Wv::Bs(slot)
    }

    fn dots<const N: usize>(&mut self, pairs: [(Wv, Wv); N]) -> Result<[f64; N]> {
        self.all_sum(|w, p: &mut [f64; N]| {
            for (o, (a, b)) in p.iter_mut().zip(pairs) {
                *o = dot(w.get(a), w.get(b));
            }
        })
    }

    fn set_scaled(&mut self, dst: Wv, a: f64, src: Wv) {
        debug_assert!(dst != src);
        for w in &mut self.workers {
            w.with_dst(dst, |d, w| {
                for (o, x) in d.iter_mut().zip(w.get(src)) {
                    *o = a * x;
                }
            });
        }
    }

    fn rescale(&mut self, dst: Wv, a: f64) {
        for w in &mut self.workers {
            w.get_mut(dst).iter_mut().for_each(|o| *o *= a);
        }
    }

    fn axpy(&mut self, dst: Wv, a: f64, x: Wv) {
        debug_assert!(dst != x);
        for w in &mut self.workers {
            w.with_dst(dst, |d, w| {
                for (o, v) in d.iter_mut().zip(w.get(x)) {
                    *o += a * v;
                }
            });
        }
    }

    fn axpbz(&mut self, dst: Wv, a: f64, x: Wv, b: f64, z: Wv) {
        debug_assert!(dst != x && dst != z);
        for w in &mut self.workers {
            w.with_dst(dst, |d, w| {
                for ((o, xv), zv) in d.iter_mut().zip(w.get(x)).zip(w.get(z)) {
                    *o += a * xv - b * zv;
                }
            });
        }
    }
}

impl<'a, F: Fabric> Engine<'a, F> {
    // ---- HAMCMC ----

    pub(super) fn hamcmc_init(&mut self, hs: &HamcmcSettings) -> Result<()> {
        let m = hs.memory;
        let cap = m - 1;
        self.ring = HamRing { pairs: PairRing::new(cap), ..HamRing::default() };
        for w in &mut self.workers {
            let n = w.len();
            w.hist = vec![w.x.clone()];
            w.ps = vec![vec![0.0; n]; cap];
            w.py = vec![vec![0.0; n]; cap];
            w.pbs = vec![vec![0.0; n]; cap];
        }
        // 2M SGLD warm-up steps, noise indices 1 … 2M; the path θ₀ … θ_{2M} is kept.
        for t in 1..=(2 * m) as u64 {
            self.sgld_step(hs.warmup_step_size, t)?;
            for w in &mut self.workers {
                let x = w.x.clone();
                w.hist.push(x);
            }
        }
        // Pairs τ = M+2 … 2M, each on its own diagonal.
        for tau in HamcmcSchedule::warmup_pairs(m) {
            self.next_diagonal()?;
            self.gradients(Some(tau), false);
            self.gradients(Some(tau - m), true);
            self.push_pair(hs.trust_region, tau as u64, |w| (&w.hist[tau], &w.hist[tau - m]))?;
        }
        // History θ_{M+1} … θ_{2M}.
        for w in &mut self.workers {
            w.hist.drain(..=m);
        }
        Ok(())
    }

    /// s = new − old, y = grad − g_old + λ s; the pair is kept if sᵀy > 0.
    pub(super) fn push_pair(
        &mut self,
        lambda: f64,
        tau: u64,
        new_old: impl for<'w> Fn(&'w Worker) -> (&'w Vec<f64>, &'w Vec<f64>),
    ) -> Result<()> {
        for w in &mut self.workers {
            let (mut s, mut y) = (std::mem::take(&mut w.step), std::mem::take(&mut w.tmp));
            {
                let (new, old) = new_old(w);
                for ((((sv, yv), n), o), (g, go)) in
                    s.iter_mut().zip(y.iter_mut()).zip(new.iter()).zip(old.iter()).zip(w.grad.iter().zip(&w.g_old))
                {
                    *sv = n - o;
                    *yv = g - go + lambda * *sv;
                }
            }
            if w.status == OK && !all_finite(&y) {
                w.status = BAD_GRADIENT;
            }
            w.step = s;
            w.tmp = y;
        }
        let [sy, bad] = self.all_sum(|w, p: &mut [f64; 2]| {
            p[0] = dot(&w.step, &w.tmp);
            p[1] = w.status;
        })?;
        if bad != 0.0 {
            return self.check_status(tau);
        }
        if let Admitted::Stored { slot: k, dropped_oldest } = self.ring.pairs.admit(sy) {
            for w in &mut self.workers {
                w.ps[k].copy_from_slice(&w.step);
                w.py[k].copy_from_slice(&w.tmp);
            }
            self.ring.schedule.admitted(tau, dropped_oldest);
        }
        Ok(())
    }

    /// `step = H g_old` (two-loop recursion) and `sz = S noise` (product form): the crate's one
    /// L-BFGS recursion ([`PairRing`]) on the workers' split vectors.
    pub(super) fn apply_h_s(&mut self, gamma: f64) -> Result<()> {
        // The ring is taken out (leaving an empty one, no allocation) so that the engine itself
        // can be the space the recursion runs over.
        let mut pairs = std::mem::take(&mut self.ring.pairs);
        let r = pairs
            .apply_h(self, Wv::GOld, Wv::Step, gamma)
            .and_then(|()| pairs.refresh(self, gamma))
            .and_then(|()| pairs.apply_s(self, Wv::Noise, Wv::Sz, gamma));
        self.ring.pairs = pairs;
        r
    }

    pub(super) fn hamcmc_step(&mut self, hs: &HamcmcSettings, k: u64) -> Result<()> {
        let t = HamcmcSchedule::t(hs.memory, k);
        let eps = HamcmcSchedule::step_size(&hs.step_size, hs.memory, k);
        let HamRing { pairs, schedule } = &mut self.ring;
        schedule.expire(hs.memory, t, || pairs.pop_oldest());
        self.next_diagonal()?;
        self.draw_noise(t);
        let old = self.ring.schedule.oldest();
        self.gradients(Some(old), true);
        self.apply_h_s(hs.initial_scale)?;
        for w in &mut self.workers {
            hamcmc_update(&mut w.x, &w.hist[old], &w.step, &w.sz, eps);
        }
        self.mark_state();
        self.gradients(None, false);
        // The pair's reduction carries every worker's status (state and both gradients).
        self.push_pair(hs.trust_region, t, |w| (&w.x, &w.hist[old]))?;
        for w in &mut self.workers {
            let (x, h) = (&w.x, &mut w.hist[old]);
            h.copy_from_slice(x);
        }
        self.ring.schedule.advance(self.workers.first().map_or(1, |w| w.hist.len()));
        Ok(())
    }
}
