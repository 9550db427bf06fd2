//! A rank's share of the work: its W rows, the H block it holds, block gradients and the HAMCMC
//! history ring.

use crate::mf::partition::{Block, TAG_NOISE};
use crate::models::PmfTerms;
use crate::numeric::lbfgs::PairRing;
use crate::numeric::rng::{fill_standard_normal, stream};

/// Status codes a worker reports at the end of each iteration.
pub(super) const OK: f64 = 0.0;
pub(super) const BAD_GRADIENT: f64 = 1.0;
pub(super) const BAD_STATE: f64 = 2.0;

pub(super) fn all_finite(v: &[f64]) -> bool {
    v.iter().all(|x| x.is_finite())
}

/// One worker: its W rows and the H block it holds, each quantity one vector `[W_b | H_c]`.
pub(super) struct Worker {
    pub(super) b: usize,
    /// Length of the W section.
    pub(super) lw: usize,
    /// The H part held (its column block).
    pub(super) c: usize,
    pub(super) x: Vec<f64>,
    /// pSGLD's RMSprop average.
    pub(super) v: Vec<f64>,
    /// HAMCMC: past samples (warm-up path, then the ring θ_{t−M} … θ_{t−1}), pairs by slot.
    pub(super) hist: Vec<Vec<f64>>,
    pub(super) ps: Vec<Vec<f64>>,
    pub(super) py: Vec<Vec<f64>>,
    pub(super) pbs: Vec<Vec<f64>>,
    // Scratch (not moved).
    pub(super) grad: Vec<f64>,
    pub(super) g_old: Vec<f64>,
    pub(super) step: Vec<f64>,
    pub(super) noise: Vec<f64>,
    pub(super) sz: Vec<f64>,
    pub(super) tmp: Vec<f64>,
    pub(super) status: f64,
}

impl Worker {
    pub(super) fn len(&self) -> usize {
        self.x.len()
    }

    /// The vectors whose H sections move with the H block, in a fixed order.
    pub(super) fn moving(&mut self) -> impl Iterator<Item = &mut Vec<f64>> {
        std::iter::once(&mut self.x)
            .chain(std::iter::once(&mut self.v).filter(|v| !v.is_empty()))
            .chain(self.hist.iter_mut())
            .chain(self.ps.iter_mut())
            .chain(self.py.iter_mut())
            .chain(self.pbs.iter_mut())
    }

    pub(super) fn n_moving(&self) -> usize {
        1 + usize::from(!self.v.is_empty()) + self.hist.len() + self.ps.len() + self.py.len() + self.pbs.len()
    }

    /// Noise of iteration t: the W section from block b's stream, the H section from part c's.
    pub(super) fn draw_noise(&mut self, seed: u64, nb: usize, t: u64) {
        let lw = self.lw;
        fill_standard_normal(&mut stream(seed, &[TAG_NOISE, self.b as u64, t]), &mut self.noise[..lw]);
        fill_standard_normal(&mut stream(seed, &[TAG_NOISE, (nb + self.c) as u64, t]), &mut self.noise[lw..]);
    }
}

/// `out = ∇Ũ(θ)` on block (b, c) of the diagonal (the W rows of block b, the first `lw`
/// entries, then the H rows of block c), the data terms scaled by `scale = N / |Ω|`: [`Pmf`]'s
/// prior and rating terms ([`PmfTerms`]).
///
/// [`Pmf`]: crate::Pmf
pub(super) fn block_gradient(cs: &PmfTerms, blk: &Block, lw: usize, theta: &[f64], scale: f64, out: &mut [f64]) {
    cs.grad_prior(lw, theta, out);
    let k = cs.k;
    for ((&r, &j), &x) in blk.rows.iter().zip(&blk.cols).zip(&blk.values) {
        cs.add_rating(theta, r as usize * k, lw + j as usize * k, x, scale, out);
    }
}

/// HAMCMC's replicated state (the same on every worker): the L-BFGS pair ring (the crate's
/// one recursion, [`PairRing`], over the workers' split vectors), each pair's iteration, and
/// the history pointer. Empty (no slot) until HAMCMC's initialisation.
#[derive(Default)]
pub(super) struct HamRing {
    pub(super) pairs: PairRing,
    /// Hamcmc's own schedule: which sample a step starts from, which pairs are recent enough.
    pub(super) schedule: crate::samplers::hamcmc::HamcmcSchedule,
}

/// Names of the workers' vectors for the L-BFGS recursion (each a slice on every worker).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Wv {
    S(usize),
    Y(usize),
    Bs(usize),
    Step,
    GOld,
    Sz,
    Noise,
}

impl Worker {
    pub(super) fn get(&self, v: Wv) -> &[f64] {
        match v {
            Wv::S(k) => &self.ps[k],
            Wv::Y(k) => &self.py[k],
            Wv::Bs(k) => &self.pbs[k],
            Wv::Step => &self.step,
            Wv::GOld => &self.g_old,
            Wv::Sz => &self.sz,
            Wv::Noise => &self.noise,
        }
    }

    pub(super) fn get_mut(&mut self, v: Wv) -> &mut Vec<f64> {
        match v {
            Wv::S(k) => &mut self.ps[k],
            Wv::Y(k) => &mut self.py[k],
            Wv::Bs(k) => &mut self.pbs[k],
            Wv::Step => &mut self.step,
            Wv::GOld => &mut self.g_old,
            Wv::Sz => &mut self.sz,
            Wv::Noise => &mut self.noise,
        }
    }

    /// Runs `f` on `dst` (mutable) and the worker (shared; `dst` reads as empty there).
    pub(super) fn with_dst(&mut self, dst: Wv, f: impl FnOnce(&mut [f64], &Self)) {
        let mut d = std::mem::take(self.get_mut(dst));
        f(&mut d, self);
        *self.get_mut(dst) = d;
    }
}
