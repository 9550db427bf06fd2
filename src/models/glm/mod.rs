//! Generalised linear models with analytic gradients, potentials and Hessian-vector products.

mod special;

mod family;
pub use family::{Family, GlmSettings};
mod model;
pub use model::Glm;

#[cfg(test)]
mod tests;
