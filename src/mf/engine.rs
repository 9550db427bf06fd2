//! The engine that runs one chain over the fabric: diagonal schedule, SGLD and pSGLD steps,
//! evaluation and the assembled output.

use crate::error::{Error, Result};
use crate::mf::fabric::Fabric;
use crate::mf::partition::{BlockPartition, RowShard, TAG_INIT, TAG_SCHEDULE};
use crate::mf::settings::{MfModel, MfOutput, MfRunSettings, MfTracePoint, MfUpdate};
use crate::mf::worker::{BAD_GRADIENT, BAD_STATE, HamRing, OK, Worker, all_finite, block_gradient};
use crate::models::PmfTerms;
use crate::numeric::rng::{fill_standard_normal, stream};
use crate::samplers::{PsgldSettings, psgld_update, rmsprop_update, sgld_update};
use ndarray::Array2;
use rand::RngExt;
use std::time::Instant;

/// One chain of the block-scheduled sampler over a fabric.
pub(crate) struct Engine<'a, F: Fabric> {
    fabric: F,
    shards: Vec<&'a RowShard>,
    tests: Vec<&'a RowShard>,
    partition: BlockPartition,
    cs: PmfTerms,
    update: MfUpdate,
    run: MfRunSettings,
    pub(super) workers: Vec<Worker>,
    /// Ratings per diagonal and in all.
    diag_sizes: Vec<usize>,
    n_train: usize,
    n_test: usize,
    sched: crate::numeric::rng::ChainRng,
    diag: usize,
    counts: Vec<u64>,
    pub(super) ring: HamRing,
    // Exchange buffers.
    red_local: Vec<f64>,
    red_all: Vec<f64>,
    sections: Vec<Vec<f64>>,
    sec_lens: Vec<usize>,
    // Test predictions: running sums per local worker, per column block.
    pred_sum: Vec<Vec<Vec<f64>>>,
    n_avg: u64,
    h_all: Vec<f64>,
    h_stride: usize,
}

impl<'a, F: Fabric> Engine<'a, F> {
    /// Sets up the local workers. `shards`/`tests` are this process's workers' (in order);
    /// `sizes` is every worker's block sizes (B × B, row block major); `test_total` the number
    /// of test ratings of all workers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fabric: F,
        shards: Vec<&'a RowShard>,
        tests: Vec<&'a RowShard>,
        model: &MfModel,
        update: &MfUpdate,
        run: &MfRunSettings,
        sizes: &[usize],
        test_total: usize,
    ) -> Result<Self> {
        let partition = shards[0].partition.clone();
        let nb = partition.blocks();
        let diag_sizes: Vec<usize> = (0..nb).map(|s| (0..nb).map(|b| sizes[b * nb + (b + s) % nb]).sum()).collect();
        let n_train: usize = diag_sizes.iter().sum();
        let k = model.rank;
        let cs = model.terms()?;
        let local = fabric.local();
        let max_h = (0..nb).map(|c| partition.col_range(c).len()).max().unwrap_or(0) * k;
        let mut workers = Vec::with_capacity(local.len());
        for b in local.clone() {
            let lw = partition.row_range(b).len() * k;
            let lh = partition.col_range(b).len() * k;
            let cap = lw + max_h;
            let mut x = Vec::with_capacity(cap);
            x.resize(lw + lh, 0.0);
            fill_standard_normal(&mut stream(run.seed, &[TAG_INIT, b as u64]), &mut x[..lw]);
            fill_standard_normal(&mut stream(run.seed, &[TAG_INIT, (nb + b) as u64]), &mut x[lw..]);
            x.iter_mut().for_each(|v| *v *= model.init_scale);
            let scratch = || {
                let mut v = Vec::with_capacity(cap);
                v.resize(lw + lh, 0.0);
                v
            };
            let v = if matches!(update, MfUpdate::Psgld(_)) { scratch() } else { Vec::new() };
            workers.push(Worker {
                b,
                lw,
                c: b,
                x,
                v,
                hist: Vec::new(),
                ps: Vec::new(),
                py: Vec::new(),
                pbs: Vec::new(),
                grad: scratch(),
                g_old: scratch(),
                step: scratch(),
                noise: scratch(),
                sz: scratch(),
                tmp: scratch(),
                status: OK,
            });
        }
        let pred_sum = tests.iter().map(|t| t.blocks.iter().map(|blk| vec![0.0; blk.values.len()]).collect()).collect();
        let h_stride = max_h + 1;
        Ok(Engine {
            fabric,
            shards,
            tests,
            cs,
            update: *update,
            run: *run,
            workers,
            diag_sizes,
            n_train,
            n_test: test_total,
            sched: stream(run.seed, &[TAG_SCHEDULE]),
            diag: 0,
            counts: vec![0; nb],
            ring: HamRing::default(),
            red_local: Vec::new(),
            red_all: Vec::new(),
            sections: vec![Vec::with_capacity(0); local.len()],
            sec_lens: (0..nb).map(|c| partition.col_range(c).len() * k).collect(),
            pred_sum,
            n_avg: 0,
            h_all: vec![0.0; nb * h_stride],
            h_stride,
            partition,
        })
    }

    fn nb(&self) -> usize {
        self.partition.blocks()
    }

    /// Picks the next diagonal (∝ its size) and moves the H blocks to it.
    pub(super) fn next_diagonal(&mut self) -> Result<()> {
        let u = self.sched.random::<f64>() * self.n_train as f64;
        let mut acc = 0.0;
        let mut s = self.nb() - 1;
        for (q, &n) in self.diag_sizes.iter().enumerate() {
            acc += n as f64;
            if u < acc && n > 0 {
                s = q;
                break;
            }
        }
        while self.diag_sizes[s] == 0 {
            s -= 1; // u rounded up to the total: the last non-empty diagonal
        }
        self.counts[s] += 1;
        if s != self.diag {
            self.move_h(s)?;
        }
        Ok(())
    }

    fn move_h(&mut self, to: usize) -> Result<()> {
        let nb = self.nb();
        for (w, sec) in self.workers.iter_mut().zip(self.sections.iter_mut()) {
            let lw = w.lw;
            sec.clear();
            for v in w.moving() {
                sec.extend_from_slice(&v[lw..]);
            }
        }
        self.fabric.shift(self.diag, to, &mut self.sections, &self.sec_lens)?;
        for (w, sec) in self.workers.iter_mut().zip(&self.sections) {
            let c = (w.b + to) % nb;
            let lh = self.sec_lens[c];
            let lw = w.lw;
            let n = w.n_moving();
            if sec.len() != n * lh {
                return Err(Error::DimensionMismatch { what: "received H block", expected: n * lh, got: sec.len() });
            }
            for (q, v) in w.moving().enumerate() {
                v.truncate(lw);
                v.extend_from_slice(&sec[q * lh..(q + 1) * lh]);
            }
            for v in [&mut w.grad, &mut w.g_old, &mut w.step, &mut w.noise, &mut w.sz, &mut w.tmp] {
                v.resize(lw + lh, 0.0);
            }
            w.c = c;
        }
        self.diag = to;
        Ok(())
    }

    fn scale(&self) -> f64 {
        self.n_train as f64 / self.diag_sizes[self.diag] as f64
    }

    /// Sums `n` per-worker partials (filled by `f` for each local worker) over all workers, in
    /// worker order; returns the first `n` entries of `red_all` summed (in `out`).
    pub(super) fn all_sum<const N: usize>(&mut self, f: impl Fn(&Worker, &mut [f64; N])) -> Result<[f64; N]> {
        self.red_local.clear();
        for w in &self.workers {
            let mut p = [0.0; N];
            f(w, &mut p);
            self.red_local.extend_from_slice(&p);
        }
        self.red_all.resize(N * self.nb(), 0.0);
        self.fabric.gather(&self.red_local, &mut self.red_all)?;
        let mut out = [0.0; N];
        for chunk in self.red_all.chunks_exact(N) {
            for (o, v) in out.iter_mut().zip(chunk) {
                *o += v;
            }
        }
        Ok(out)
    }

    /// Exchanges the workers' status; the first failing worker's error on every worker.
    pub(super) fn check_status(&mut self, iteration: u64) -> Result<()> {
        self.red_local.clear();
        self.red_local.extend(self.workers.iter().map(|w| w.status));
        self.red_all.resize(self.nb(), 0.0);
        self.fabric.gather(&self.red_local, &mut self.red_all)?;
        let Some((rank, &code)) = self.red_all.iter().enumerate().find(|(_, c)| **c != OK) else {
            return Ok(());
        };
        let source = if code == BAD_GRADIENT {
            Error::NonFiniteGradient { iteration }
        } else {
            Error::NonFiniteState { iteration }
        };
        Err(if self.fabric.local().contains(&rank) {
            Error::Rank { rank, source: Box::new(source) }
        } else {
            Error::RankFailure { rank, chain: None, iteration: Some(iteration), message: source.to_string() }
        })
    }

    /// Gradients at `x` (or at `hist[h]`) into `grad` (or `g_old`) for every local worker.
    pub(super) fn gradients(&mut self, at_hist: Option<usize>, into_old: bool) {
        let scale = self.scale();
        for (w, sh) in self.workers.iter_mut().zip(&self.shards) {
            let blk = &sh.blocks[w.c];
            let theta = match at_hist {
                Some(h) => &w.hist[h],
                None => &w.x,
            };
            let out = if into_old { &mut w.g_old } else { &mut w.grad };
            block_gradient(&self.cs, blk, w.lw, theta, scale, out);
            if w.status == OK && !all_finite(out) {
                w.status = BAD_GRADIENT;
            }
        }
    }

    pub(super) fn mark_state(&mut self) {
        for w in &mut self.workers {
            if w.status == OK && !all_finite(&w.x) {
                w.status = BAD_STATE;
            }
        }
    }

    pub(super) fn draw_noise(&mut self, t: u64) {
        let (seed, nb) = (self.run.seed, self.nb());
        for w in &mut self.workers {
            w.draw_noise(seed, nb, t);
        }
    }

    /// One SGLD step of size h from `x` (noise index t).
    pub(super) fn sgld_step(&mut self, h: f64, t: u64) -> Result<()> {
        self.next_diagonal()?;
        self.gradients(None, false);
        self.draw_noise(t);
        for w in &mut self.workers {
            sgld_update(&mut w.x, &w.grad, &w.noise, h);
        }
        self.mark_state();
        self.check_status(t)
    }

    fn psgld_step(&mut self, p: &PsgldSettings, t: u64) -> Result<()> {
        self.next_diagonal()?;
        self.gradients(None, false);
        self.draw_noise(t);
        let h = p.step_size.at(t);
        let n = self.n_train as f64;
        for w in &mut self.workers {
            rmsprop_update(&mut w.v, &w.grad, n, p.decay, t == 1);
            psgld_update(&mut w.x, &w.grad, &w.noise, &w.v, h, p.damping);
        }
        self.mark_state();
        self.check_status(t)
    }
}

impl<'a, F: Fabric> Engine<'a, F> {
    // ---- evaluation and output ----

    /// Test RMSE of the current sample and (after burn-in) of the running predictive mean.
    fn evaluate(&mut self, iteration: u64, seconds: f64) -> Result<MfTracePoint> {
        let (nb, k, stride) = (self.nb(), self.cs.k, self.h_stride);
        // Every worker's H section (padded to a common stride, part index first).
        self.red_local.clear();
        for w in &self.workers {
            self.red_local.push(w.c as f64);
            self.red_local.extend_from_slice(&w.x[w.lw..]);
            self.red_local.resize(self.red_local.len() + stride - 1 - (w.len() - w.lw), 0.0);
        }
        let mut h_all = std::mem::take(&mut self.h_all);
        let gathered = self.fabric.gather(&self.red_local, &mut h_all);
        let averaging = iteration > self.run.burn_in;
        if averaging {
            self.n_avg += 1;
        }
        let mut partial = Vec::with_capacity(2 * self.workers.len());
        if gathered.is_ok() {
            let mut offsets = vec![0usize; nb];
            for q in 0..nb {
                offsets[h_all[q * stride] as usize] = q * stride + 1;
            }
            for ((w, test), sums) in self.workers.iter().zip(&self.tests).zip(self.pred_sum.iter_mut()) {
                let (mut se, mut se_mean) = (0.0, 0.0);
                for (c, (blk, sum)) in test.blocks.iter().zip(sums.iter_mut()).enumerate() {
                    let hc = &h_all[offsets[c]..offsets[c] + self.sec_lens[c]];
                    for (((&r, &j), &x), s) in blk.rows.iter().zip(&blk.cols).zip(&blk.values).zip(sum.iter_mut()) {
                        let (a, h) = (r as usize * k, j as usize * k);
                        let p = self.cs.predict(&w.x[a..a + k], &hc[h..h + k]);
                        se += (p - x) * (p - x);
                        if averaging {
                            *s += p;
                            let pm = *s / self.n_avg as f64;
                            se_mean += (pm - x) * (pm - x);
                        }
                    }
                }
                partial.extend_from_slice(&[se, se_mean]);
            }
        }
        self.h_all = h_all;
        gathered?;
        let mut all = vec![0.0; 2 * nb];
        self.fabric.gather(&partial, &mut all)?;
        let (mut se, mut se_mean) = (0.0, 0.0);
        for ch in all.chunks_exact(2) {
            se += ch[0];
            se_mean += ch[1];
        }
        let n = self.n_test.max(1) as f64;
        Ok(MfTracePoint {
            iteration,
            seconds,
            rmse_sample: (se / n).sqrt(),
            rmse_mean: averaging.then(|| (se_mean / n).sqrt()),
        })
    }

    /// Every worker's section `[lo..hi]` of `x`, assembled into `rows × K` by block.
    fn assemble(&mut self, w_part: bool) -> Result<Array2<f64>> {
        let (nb, k) = (self.nb(), self.cs.k);
        let lens: Vec<usize> =
            (0..nb).map(|q| if w_part { self.partition.row_range(q).len() * k } else { self.sec_lens[q] }).collect();
        let stride = lens.iter().max().copied().unwrap_or(0) + 1;
        let mut local = Vec::with_capacity(stride * self.workers.len());
        for w in &self.workers {
            let (idx, sec) = if w_part { (w.b, &w.x[..w.lw]) } else { (w.c, &w.x[w.lw..]) };
            local.push(idx as f64);
            local.extend_from_slice(sec);
            local.resize(local.len() + stride - 1 - sec.len(), 0.0);
        }
        let mut all = vec![0.0; stride * nb];
        self.fabric.gather(&local, &mut all)?;
        let n = if w_part { self.partition.n_rows() } else { self.partition.n_cols() };
        let mut out = Array2::zeros((n, k));
        let flat = out.as_slice_mut().ok_or(Error::NotStored { what: "contiguous factor matrix" })?;
        for ch in all.chunks_exact(stride) {
            let q = ch[0] as usize;
            let start = if w_part { self.partition.row_range(q).start } else { self.partition.col_range(q).start } * k;
            flat[start..start + lens[q]].copy_from_slice(&ch[1..1 + lens[q]]);
        }
        Ok(out)
    }

    /// Runs the chain.
    pub(crate) fn run(mut self) -> Result<MfOutput> {
        let update = self.update;
        if let MfUpdate::Hamcmc(hs) = &update {
            self.hamcmc_init(hs)?;
        }
        let mut trace = Vec::new();
        let mut seconds = 0.0;
        let every = self.run.eval_every;
        for k in 1..=self.run.n_iter {
            let start = Instant::now();
            match &update {
                MfUpdate::Sgld(s) => self.sgld_step(s.step_size.at(k), k)?,
                MfUpdate::Psgld(p) => self.psgld_step(p, k)?,
                MfUpdate::Hamcmc(hs) => self.hamcmc_step(hs, k)?,
            }
            seconds += start.elapsed().as_secs_f64();
            if every > 0 && (k % every == 0 || k == self.run.n_iter) {
                trace.push(self.evaluate(k, seconds)?);
            }
        }
        let w = self.assemble(true)?;
        let h = self.assemble(false)?;
        Ok(MfOutput { w, h, trace, diagonal_counts: self.counts, skipped_pairs: self.ring.pairs.n_skipped(), seconds })
    }
}
