//! A logistic regression read from a CSV file and sampled on the trustworthy path, in a few lines:
//! the Wisconsin breast-cancer data (`data/wdbc.csv`: 569 aspirates, 30 features as measured,
//! the diagnosis in the column `benign`; source and licence in `data/README.md`), the GLM
//! family's default weakly informative priors scaled to the data, SGLD on minibatches of 28
//! (N/n ≈ 20). `Sample` tunes the step for this run, whitens, starts 4 chains dispersed around
//! the mode, runs them, checks the step's bias and states the verdict with the summary table.
//!
//! The second half shows that nothing is hidden: the seven calls `Sample` makes, by hand with the
//! same settings, give the same draws bit for bit and the same summary.
//!
//! Run with `cargo run --release --example csv_logistic`. Ends with `RESULT {json}`.

use sgmcmc::prelude::*;
use sgmcmc::tune::dispersed_starts;
use sgmcmc::{Family, step_bias};
use sgmcmc::{
    GlmSettings,
    tune::{PlannedRun, TuneSettings, tune},
};

/// Kept draws per chain.
const DRAWS: u64 = 100_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // ---- The user's code: read, choose a sampler, sample, print. ----
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/wdbc.csv");
    let model = Glm::from_csv(Family::Logistic, path, "benign", &GlmSettings::default())?;
    println!("{model}");
    let sgld = Sgld::new(SgldSettings::default(), Minibatch::new(28))?;
    let fit = Sample::new(&model, sgld.clone()).draws(DRAWS).chains(4).seed(7).run()?;
    println!("{fit}");
    // ---- End of the user's code. ----

    // The same by hand: tune for this run, dispersed starts, the run, the bias check, the verdict.
    let ts = TuneSettings { planned_run: PlannedRun::new(DRAWS, 4), ..Default::default() };
    let tuned = tune(&model, &sgld, &vec![0.0; model.dim()], &ts)?;
    let starts = dispersed_starts(&model, &tuned.mode, 4, sgmcmc::sample::START_SPREAD, 7)?;
    let out = Runner::new(&model, &tuned.sampler).starts(&starts).settings(fit.settings).run()?;
    let bias = step_bias(&model, &tuned.sampler, &out, sgmcmc::STEP_BIAS_COST)?;
    let verdict = sgmcmc::convergence_with_bias(&out.estimate, &bias)?;
    let bits = |e: &Estimate| -> Result<Vec<u64>, sgmcmc::Error> {
        Ok(e.stacked_draws()?.iter().map(|x| x.to_bits()).collect())
    };
    let same_draws = bits(&out.estimate)? == bits(fit.estimate())?;
    // (`Sample` also names the failed coordinates, after the CSV's columns.)
    let mut named = fit.convergence.clone();
    named.failed_names.clear();
    let same_verdict = verdict == named;
    println!(
        "by hand: the same step ({}), the same draws bit for bit ({same_draws}), the same verdict ({same_verdict})",
        tuned.step_size == fit.tuned.step_size
    );
    assert!(same_draws && same_verdict, "the one call and the seven calls disagree");
    let mean = fit.estimate().mean()?;
    println!(
        "RESULT {{\"n\":{},\"d\":{},\"step\":{:.4e},\"converged\":{},\"stated_bound\":{:.4},\"max_rhat\":{:.4},\"min_ess_bulk\":{:.0},\"intercept_mean\":{:.4},\"same_draws\":{same_draws}}}",
        model.n_data(),
        model.dim(),
        fit.tuned.step_size,
        fit.convergence.converged,
        fit.convergence.stated_bound(),
        fit.convergence.max_rhat,
        fit.convergence.min_ess_bulk,
        mean[0]
    );
    Ok(())
}
