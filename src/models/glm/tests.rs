use crate::numeric::special::{digamma, log_phi, mills, trigamma};

#[test]
fn special_functions() {
    // ψ(1) = −γ, ψ(0.5) = −γ − 2 ln 2, ψ'(1) = π²/6, ψ'(0.5) = π²/2.
    let g = 0.577_215_664_901_532_9;
    assert!((digamma(1.0) + g).abs() < 1e-14);
    assert!((digamma(0.5) + g + 2.0 * 2f64.ln()).abs() < 1e-14);
    let pi2 = std::f64::consts::PI.powi(2);
    assert!((trigamma(1.0) - pi2 / 6.0).abs() < 1e-13);
    assert!((trigamma(0.5) - pi2 / 2.0).abs() < 1e-13);
    // Both branches of the Mills ratio and log Φ agree at the switch.
    let (a, b) = (mills(-29.999_999), mills(-30.000_001));
    assert!((a - b).abs() / a < 1e-6, "{a} {b}");
    let (a, b) = (log_phi(-29.999_999), log_phi(-30.000_001));
    assert!((a - b).abs() / a.abs() < 1e-6, "{a} {b}");
}
