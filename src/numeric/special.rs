//! Special functions, in one place: the logistic function and its exponential (the
//! logistic likelihood's inner loop), softplus, Mills' ratio and log Φ (probit), digamma and
//! trigamma (negative binomial), and the standard normal quantile Φ⁻¹ (the diagnostics' and the
//! verdict's bounds).

/// `exp(x)` for `x ≤ 0` as a ratio `(num, den)`, accurate to a few ulps, in branch-free
/// arithmetic so that loops over it vectorise (libm's `exp` is an opaque call, and cost half of
/// a minibatch gradient). NaN in, NaN out.
///
/// fdlibm's method: the reduction `x = k ln 2 + r`, `|r| ≤ ln 2 / 2`, and the rational form
/// `exp(r) = 1 + r + r c / (2 − c) = (2 + 2r − c) / (2 − c)` with `c = r − r² P(r²)`
/// (P of degree 4, error below 2⁻⁵⁹); `2^k` is built from the exponent bits and folded into the
/// numerator. Returning the ratio lets the sigmoid do a single division. Arguments below −708 are
/// clamped to −708 (`exp(−708) ≈ 3e−308`, so `2^k` stays a normal number): the value is only
/// needed to be tiny there.
#[inline(always)]
pub(crate) fn exp_nonpositive_ratio(x: f64) -> (f64, f64) {
    /// 1.5 · 2⁵²: adding it rounds a float of magnitude < 2⁵¹ to an integer, which it leaves
    /// in the low mantissa bits.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    /// ln 2 split so that `k · LN2_HI` is exact for |k| < 2²⁰ (fdlibm's constants).
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    /// fdlibm's minimax coefficients of `(r − c) / r²`.
    const P: [f64; 5] = [
        1.666_666_666_666_660_2e-1,
        -2.777_777_777_701_559_3e-3,
        6.613_756_321_437_934e-5,
        -1.653_390_220_546_525_2e-6,
        4.138_136_797_057_238_5e-8,
    ];
    // Written as a comparison (not `max`) so that NaN is kept.
    let x = if x < -708.0 { -708.0 } else { x };
    let t = x * std::f64::consts::LOG2_E + SHIFT;
    let k = t - SHIFT;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let r2 = r * r;
    // P(r²) by Estrin's scheme: a shorter dependency chain than Horner's.
    let r4 = r2 * r2;
    let c = r - r2 * ((P[0] + r2 * P[1]) + r4 * ((P[2] + r2 * P[3]) + r4 * P[4]));
    // The low 12 bits of t's representation are k mod 2¹²; k + 1023 ∈ [1, 1023] is the biased
    // exponent of 2^k.
    let two_k = f64::from_bits(t.to_bits().wrapping_add(1023) << 52);
    (two_k * ((2.0 + 2.0 * r) - c), 2.0 - c)
}

/// `(σ(z), σ(−z))`, each accurate to a few ulps relative (also in the tails, where one of them
/// is tiny), without overflow for any z; NaN for NaN.
///
/// With `e = exp(−|z|) = n / m`: `σ(|z|) = m / (m + n)` and `σ(−|z|) = n / (m + n)`.
#[inline(always)]
pub(crate) fn sigmoid_pair(z: f64) -> (f64, f64) {
    let (n, m) = exp_nonpositive_ratio(-z.abs());
    let inv = 1.0 / (m + n);
    let (big, small) = (m * inv, n * inv);
    if z >= 0.0 { (big, small) } else { (small, big) }
}

/// The logistic function `σ(z) = 1 / (1 + exp(−z))`, never NaN for finite or infinite z.
#[inline(always)]
pub(crate) fn sigmoid(z: f64) -> f64 {
    sigmoid_pair(z).0
}

/// `log(1 + exp(z))` without overflow.
#[inline(always)]
pub(crate) fn softplus(z: f64) -> f64 {
    if z > 0.0 { z + (-z).exp().ln_1p() } else { z.exp().ln_1p() }
}

/// The inverse Mills ratio `φ(z)/Φ(z)`, accurate in both tails.
pub(crate) fn mills(z: f64) -> f64 {
    if z > -30.0 {
        let phi = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
        phi / (0.5 * libm::erfc(-z / std::f64::consts::SQRT_2))
    } else {
        // Φ(z)/φ(z) = (1/x)(1 − 1/x² + 3/x⁴ − 15/x⁶ + …), x = −z.
        let x = -z;
        let x2 = x * x;
        x / (1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2))
    }
}

/// `log Φ(z)`, accurate in both tails.
pub(crate) fn log_phi(z: f64) -> f64 {
    if z > -30.0 {
        (0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)).ln()
    } else {
        -0.5 * z * z - 0.5 * (2.0 * std::f64::consts::PI).ln() - mills(z).ln()
    }
}

/// The digamma function ψ(x), x > 0: recurrence up to x ≥ 12, then the asymptotic series
/// (next term below 3e-15 there).
pub(crate) fn digamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 12.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    acc + x.ln()
        - 0.5 / x
        - f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (1.0 / 240.0 - f * (1.0 / 132.0)))))
}

/// The trigamma function ψ'(x), x > 0, likewise.
pub(crate) fn trigamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 12.0 {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    let f = 1.0 / (x * x);
    acc + 1.0 / x
        + f / 2.0
        + f / x * (1.0 / 6.0 - f * (1.0 / 30.0 - f * (1.0 / 42.0 - f * (1.0 / 30.0 - f * (5.0 / 66.0)))))
}

/// The standard normal quantile function Φ⁻¹(p), Wichura's algorithm AS 241 (PPND16), accurate to
/// about 1e-16 relative. Returns ±∞ at 0 and 1 and NaN outside [0, 1].
pub fn normal_quantile(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * poly(&A, r) / poly(&B, r);
    }
    let r = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let val = if r <= 5.0 {
        let r = r - 1.6;
        poly(&C, r) / poly(&D, r)
    } else {
        let r = r - 5.0;
        poly(&E, r) / poly(&F, r)
    };
    if q < 0.0 { -val } else { val }
}

#[inline]
fn poly(c: &[f64; 8], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &k| acc * x + k)
}

#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const A: [f64; 8] = [
    3.387_132_872_796_366_5,
    133.141_667_891_784_38,
    1_971.590_950_306_551_3,
    13_731.693_765_509_461,
    45_921.953_931_549_87,
    67_265.770_927_008_7,
    33_430.575_583_588_13,
    2_509.080_928_730_122_7,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const B: [f64; 8] = [
    1.0,
    42.313_330_701_600_91,
    687.187_007_492_057_9,
    5_394.196_021_424_751,
    21_213.794_301_586_597,
    39_307.895_800_092_71,
    28_729.085_735_721_943,
    5_226.495_278_852_545,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const C: [f64; 8] = [
    1.423_437_110_749_683_5,
    4.630_337_846_156_546,
    5.769_497_221_460_691,
    3.647_848_324_763_204_5,
    1.270_458_252_452_368_4,
    0.241_780_725_177_450_6,
    0.022_723_844_989_269_184,
    7.745_450_142_783_414e-4,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const D: [f64; 8] = [
    1.0,
    2.053_191_626_637_759,
    1.676_384_830_183_803_8,
    0.689_767_334_985_1,
    0.148_103_976_427_480_08,
    0.015_198_666_563_616_457,
    5.475_938_084_995_345e-4,
    1.050_750_071_644_416_9e-9,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const E: [f64; 8] = [
    6.657_904_643_501_103,
    5.463_784_911_164_114,
    1.784_826_539_917_291_3,
    0.296_560_571_828_504_9,
    0.026_532_189_526_576_124,
    0.001_242_660_947_388_078_4,
    2.711_555_568_743_487_6e-5,
    2.010_334_399_292_288_1e-7,
];
#[allow(clippy::excessive_precision)] // AS 241's published coefficients, as printed
const F: [f64; 8] = [
    1.0,
    0.599_832_206_555_888,
    0.136_929_880_922_735_8,
    0.014_875_361_290_850_615,
    7.868_691_311_456_133e-4,
    1.846_318_317_510_054_8e-5,
    1.421_511_758_316_446e-7,
    2.044_263_103_389_939_8e-15,
];
