//! Constrained parameters: a [`Layout`] of named blocks with constraints, and [`Constrained`],
//! which turns a model written on the constrained scale into a [`Model`] on ℝᵈ.

mod transforms;

mod layout;
pub use layout::{Block, Constraint, Layout};
mod model;
pub use model::Constrained;
