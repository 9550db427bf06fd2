//! The default path on three real data sets (four models) the crate was not designed around, with no hand
//! setting: `Sample::new(&model, Sgld::auto()).seed(1).run()` — the tuner chooses the gradient
//! estimator and its minibatch, the step and the length for the default accuracy (every mean
//! within ±0.1 posterior sd and every sd within ±10 %, 95 %, on the user's scale), within the
//! default budget — against a reference computed apart (NUTS from nuts-rs, 4 chains of 5 000
//! draws after its tuning, mapped to the user's scale; its own standard errors printed):
//!
//! 1. `rwm1984`: a negative-binomial count regression (the crate's `Glm`, default priors) of
//!    doctor visits in the 1984 German health registry, N = 3 874, d = 10 with r > 0;
//! 2. `star`: a varying-intercept regression of Project STAR reading scores, pupils in 79 schools
//!    (N = 5 748, d = 88), with a positive school scale τ and noise scale σ, written non-centred
//!    (`τ z_s`, the textbook default) and `star-centred` (`a_s ~ N(0, τ²)`: with 73 pupils per
//!    school, the form whose posterior is near Gaussian);
//! 3. `budgetfood`: a Student-t regression of Spanish households' food budget shares
//!    (N = 23 971, d = 8) with positive σ and ν.
//!
//! The models are in `examples/support/real_models.rs`, the data in `data/` (sources and
//! licences in `data/README.md`). Each row: the verdict (the accuracy target reached or not, and
//! why), the worst error of a mean (in reference sds) and of an sd (relative) against the
//! reference, whether that is within ±0.1 / 10 % and within the stated bound (plus twice the
//! reference's error), the wall time of `Sample` and its cost. Ends with `RESULT {json}` and
//! writes `docs/validation/real-data.md`.
//!
//! `cargo run --release --example real_data` (a few minutes, most of them the references);
//! `-- rwm1984 star star-centred budgetfood` names the data sets to run (then nothing is written).

#[path = "support/real_models.rs"]
mod real_models;
mod support;
#[path = "support/vs_nuts.rs"]
mod vs_nuts;

use sgmcmc::prelude::*;
use sgmcmc::{CheckSettings, Constrained, check_model};
use std::fmt::Write as _;
use std::time::Instant;
#[allow(unused_imports)]
use support::{cholesky_lower, normals, spd_inverse};

/// Reference draws per chain (4 chains).
const REFERENCE_DRAWS: u64 = 5_000;

/// One data set's outcome.
struct Row {
    name: &'static str,
    n: usize,
    d: usize,
    seconds: f64,
    epochs: f64,
    reached: bool,
    bound: f64,
    err_mean: f64,
    err_sd: f64,
    ref_se: f64,
    chosen: String,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let named: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |n: &str| named.is_empty() || named.iter().any(|a| a == n);
    let mut out = String::new();
    let mut rows = Vec::new();
    macro_rules! say {
        ($($t:tt)*) => {{ let line = format!($($t)*); println!("{line}"); writeln!(out, "{line}").ok(); }};
    }
    say!(
        "The default path (Sample::new(&model, Sgld::auto()).seed(1).run()) on three real data sets, against NUTS references"
    );
    if wanted("rwm1984") {
        rows.push(run_one("rwm1984", &real_models::rwm1984()?, &mut |l| say!("{l}"))?);
    }
    if wanted("star") {
        rows.push(run_one("star", &real_models::star(false)?, &mut |l| say!("{l}"))?);
    }
    if wanted("star-centred") {
        rows.push(run_one("star-centred", &real_models::star(true)?, &mut |l| say!("{l}"))?);
    }
    if wanted("budgetfood") {
        rows.push(run_one("budgetfood", &real_models::budget_food()?, &mut |l| say!("{l}"))?);
    }
    say!("");
    say!(
        "| data | N | d | estimator chosen | verdict | stated | worst mean error (sd) | worst sd error | within ±0.1 / 10 % | within stated | wall s | epochs | reference se |"
    );
    say!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        let within_target = r.err_mean <= 0.1 + 2.0 * r.ref_se && r.err_sd <= 0.1 + 2.0 * r.ref_se;
        let within_bound = r.err_mean.max(r.err_sd) <= r.bound + 2.0 * r.ref_se;
        say!(
            "| {} | {} | {} | {} | {} | ±{:.3} | {:.3} | {:.1} % | {} | {} | {:.1} | {:.0} | {:.3} |",
            r.name,
            r.n,
            r.d,
            r.chosen,
            if r.reached { "REACHED" } else { "NOT REACHED" },
            r.bound,
            r.err_mean,
            100.0 * r.err_sd,
            within_target,
            within_bound,
            r.seconds,
            r.epochs,
            r.ref_se
        );
    }
    if named.is_empty() {
        let doc = format!(
            "# Validation: the default path on real data\n\nWritten by `cargo run --release --example real_data` (sgmcmc {}); \
             regenerate it with the same command. What is run and how: the example's documentation \
             (`examples/real_data.rs`).\n\n```text\n{out}```\n",
            env!("CARGO_PKG_VERSION")
        );
        std::fs::write("docs/validation/real-data.md", doc)?;
        println!("report written to docs/validation/real-data.md");
    }
    let json: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{\"data\":\"{}\",\"n\":{},\"d\":{},\"reached\":{},\"bound\":{:.4},\"error_mean\":{:.4},\"error_sd\":{:.4},\"seconds\":{:.3},\"epochs\":{:.1},\"reference_se\":{:.4}}}",
                r.name, r.n, r.d, r.reached, r.bound, r.err_mean, r.err_sd, r.seconds, r.epochs, r.ref_se
            )
        })
        .collect();
    println!("RESULT {{\"rows\":[{}]}}", json.join(","));
    Ok(())
}

/// The default path and the reference on one model.
fn run_one<M: Model + Sync>(
    name: &'static str,
    model: &Constrained<M>,
    say: &mut dyn FnMut(String),
) -> Result<Row, Box<dyn std::error::Error>> {
    let (n, d) = (model.n_data(), model.dim());
    // The hand-written gradients against finite differences of the potentials, at the origin.
    check_model(model, &vec![0.0; d], &CheckSettings::default())?;
    let t = Instant::now();
    let fit = Sample::new(model, Sgld::auto()).seed(1).run()?;
    let seconds = t.elapsed().as_secs_f64();
    let target = fit.target.clone().expect("an accuracy target");
    let chosen = fit
        .tuned
        .preconditioning
        .split("; ")
        .find(|p| p.starts_with("gradient estimator chosen"))
        .map(|p| p.trim_start_matches("gradient estimator chosen: ").split(" (").next().unwrap_or("").to_string())
        .unwrap_or_default();
    let cost = fit.tuned.cost.datum_gradients
        + fit.tuned.cost.datum_hvps
        + (fit.output.cost - fit.output.setup_cost).datum_gradients
        + fit.bias.as_ref().map_or(0, |b| b.cost.datum_gradients);
    say(format!("{name}: N = {n}, d = {d}; {target}; {seconds:.1} s, {:.0} epochs; {chosen}", cost as f64 / n as f64));
    say(format!("{name}: {}", fit.convergence));
    // The reference on the user's scale.
    let t = Instant::now();
    let layout = model.layout();
    let width = layout.dim();
    let draws = vs_nuts::nuts_draws(model, 4, REFERENCE_DRAWS, 31)?;
    let mapped: Vec<Vec<Vec<f64>>> = draws
        .iter()
        .map(|chain| {
            chain
                .iter()
                .map(|phi| {
                    let mut theta = vec![0.0; width];
                    layout.constrain(phi, &mut theta).expect("a draw of the model's dimension");
                    theta
                })
                .collect()
        })
        .collect();
    let r = vs_nuts::reference_of(&mapped, t.elapsed().as_secs_f64());
    say(format!(
        "{name}: reference by NUTS, 4 x {REFERENCE_DRAWS} draws, largest standard error {:.4} ({:.0} s)",
        r.max_se, r.seconds
    ));
    let rows = &fit.table.rows;
    let (mut err_mean, mut err_sd, mut worst) = (0.0_f64, 0.0_f64, String::new());
    for (j, row) in rows.iter().enumerate() {
        let em = (row.mean - r.mean[j]).abs() / r.sd[j];
        let es = (row.sd / r.sd[j] - 1.0).abs();
        if em.max(es) > err_mean.max(err_sd) {
            worst = fit.table.names[j].clone();
        }
        err_mean = err_mean.max(em);
        err_sd = err_sd.max(es);
    }
    say(format!(
        "{name}: against the reference: worst mean error {err_mean:.3} sd, worst sd error {:.1} % (worst parameter {worst}); \
         stated ±{:.3}",
        100.0 * err_sd,
        target.bound
    ));
    Ok(Row {
        name,
        n,
        d: width,
        seconds,
        epochs: cost as f64 / n as f64,
        reached: target.reached,
        bound: target.bound,
        err_mean,
        err_sd,
        ref_se: r.max_se,
        chosen,
    })
}
