//! Fixed-level runs ([`MlSgld::run_fixed`]) and their checkpoints ([`MlmcCheckpoint`]).

use crate::coupled::mlsgld::allocate::{Dropped, LevelAcc, Spend};
use crate::coupled::mlsgld::level::SampleExec;
use crate::coupled::mlsgld::sampler::MlSgld;
use crate::coupled::mlsgld::settings::{MlSgldSettings, MlmcResult};
use crate::error::{Error, Result};
use crate::models::model::Model;
use crate::run::placement::Local;
use crate::samplers::SubsampledDiscretisation;
use serde::{Deserialize, Serialize};

impl<S: SubsampledDiscretisation> MlSgld<S> {
    /// Fixed levels 0..samples.len() with `samples[l]` samples at level l.
    ///
    /// Errors: [`Error::NoSamples`] for an empty list or a level with fewer than 2 samples; model,
    /// estimator and non-finite errors.
    pub fn run_fixed<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        samples: &[usize],
    ) -> Result<MlmcResult> {
        self.run_fixed_on(&Local, model, g, samples)
    }

    pub(crate) fn run_fixed_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        samples: &[usize],
    ) -> Result<MlmcResult> {
        let mut ck = self.start_fixed(samples)?;
        self.advance_fixed_on(exec, model, g, &mut ck, usize::MAX)?;
        self.result(model, &ck)
    }

    /// A resumable fixed-levels run (levels 0..samples.len(), `samples[l]` at level l) with no
    /// sample taken yet: advance it with [`advance_fixed`](Self::advance_fixed), save it with
    /// [`MlmcCheckpoint::save`], and finish it with [`result`](Self::result). A run made in several
    /// pieces, saved and loaded in between, gives bit-identical results to
    /// [`run_fixed`](Self::run_fixed): every sample depends only on (seed, level, index), and the
    /// level statistics are folded in index order.
    ///
    /// Errors: [`Error::NoSamples`] for an empty list or a level with fewer than 2 samples.
    pub fn start_fixed(&self, samples: &[usize]) -> Result<MlmcCheckpoint> {
        if samples.is_empty() || samples.iter().any(|&n| n < 2) {
            return Err(Error::NoSamples { reason: "every level needs at least 2 samples" });
        }
        let keep = self.settings.keep_points && self.settings.averaging_window.is_none();
        Ok(MlmcCheckpoint {
            targets: samples.to_vec(),
            levels: (0..samples.len()).map(|l| LevelAcc::new(l, keep)).collect(),
            settings: self.settings,
            h0: self.h0,
            theta0: self.theta0.clone(),
            model: None,
        })
    }

    /// Takes up to `max_samples` more samples of a fixed-levels run (level by level, in index
    /// order); returns whether the run is complete.
    ///
    /// Errors: [`Error::CheckpointMismatch`] if `ck` was made with other settings, step or
    /// starting point, or advanced before with another model (dimension, data size or data); model, estimator and non-finite errors.
    pub fn advance_fixed<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        model: &M,
        g: &G,
        ck: &mut MlmcCheckpoint,
        max_samples: usize,
    ) -> Result<bool> {
        self.advance_fixed_on(&Local, model, g, ck, max_samples)
    }

    fn advance_fixed_on<M: Model + ?Sized, G: Fn(&[f64]) -> f64 + Sync>(
        &self,
        exec: &dyn SampleExec,
        model: &M,
        g: &G,
        ck: &mut MlmcCheckpoint,
        max_samples: usize,
    ) -> Result<bool> {
        self.check(model)?;
        self.check_checkpoint(ck)?;
        match &ck.model {
            Some(fp) => fp.check(model)?,
            None => ck.model = Some(crate::run::checkpoint::ModelFingerprint::of(model)),
        }
        let mut left = max_samples;
        let mut budget = Spend::unlimited();
        for (acc, &target) in ck.levels.iter_mut().zip(&ck.targets) {
            let want = target.saturating_sub(acc.n).min(left);
            if want > 0 {
                self.extend_level_on(exec, model, g, acc, want, &mut budget)?;
                left -= want;
            }
        }
        Ok(ck.is_complete())
    }

    /// The result of a fixed-levels run so far (complete or not).
    ///
    /// Errors: [`Error::CheckpointMismatch`] as [`advance_fixed`](Self::advance_fixed);
    /// [`Error::NoSamples`] if a level has fewer than 2 samples.
    pub fn result<M: Model + ?Sized>(&self, model: &M, ck: &MlmcCheckpoint) -> Result<MlmcResult> {
        self.check_checkpoint(ck)?;
        if let Some(fp) = &ck.model {
            fp.check(model)?;
        }
        if ck.levels.iter().any(|a| a.n < 2) {
            return Err(Error::NoSamples { reason: "every level needs at least 2 samples" });
        }
        Ok(self.summarise(model, &ck.levels, None, &Dropped::default()))
    }

    fn check_checkpoint(&self, ck: &MlmcCheckpoint) -> Result<()> {
        let mismatch =
            |what: &'static str, e: String, f: String| Err(Error::CheckpointMismatch { what, expected: e, found: f });
        if ck.settings != self.settings {
            return mismatch("multilevel settings", format!("{:?}", self.settings), format!("{:?}", ck.settings));
        }
        if ck.h0.to_bits() != self.h0.to_bits() {
            return mismatch("level-0 step h0", self.h0.to_string(), ck.h0.to_string());
        }
        if ck.theta0.len() != self.theta0.len()
            || ck.theta0.iter().zip(&self.theta0).any(|(a, b)| a.to_bits() != b.to_bits())
        {
            return mismatch("starting point", format!("{:?}", self.theta0), format!("{:?}", ck.theta0));
        }
        if ck.levels.len() != ck.targets.len() || ck.levels.iter().enumerate().any(|(l, a)| a.level != l) {
            return Err(Error::CorruptCheckpoint { reason: "level records do not match the planned levels".into() });
        }
        Ok(())
    }
}

/// The state of a resumable fixed-levels multilevel run: the planned samples per level and the
/// statistics of the samples taken so far (see [`MlSgld::start_fixed`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlmcCheckpoint {
    targets: Vec<usize>,
    levels: Vec<LevelAcc>,
    settings: MlSgldSettings,
    h0: f64,
    theta0: Vec<f64>,
    /// The model of the first advance (checked on every later one).
    model: Option<crate::run::checkpoint::ModelFingerprint>,
}

impl MlmcCheckpoint {
    /// Samples planned per level.
    pub fn targets(&self) -> &[usize] {
        &self.targets
    }

    /// Samples taken per level so far.
    pub fn samples_done(&self) -> Vec<usize> {
        self.levels.iter().map(|a| a.n).collect()
    }

    /// Whether every level has its planned samples.
    pub fn is_complete(&self) -> bool {
        self.levels.iter().zip(&self.targets).all(|(a, &t)| a.n >= t)
    }

    /// Saves it to `path` in the [checkpoint format](crate::run::checkpoint).
    ///
    /// Errors: [`Error::Io`].
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        crate::run::checkpoint::save(path.as_ref(), "multilevel", "MlmcCheckpoint", self)
    }

    /// Loads a checkpoint saved by [`save`](Self::save).
    ///
    /// Errors: as [`RunOutput::load`](crate::RunOutput::load).
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Self> {
        crate::run::checkpoint::load(path.as_ref(), "multilevel", "MlmcCheckpoint")
    }
}
