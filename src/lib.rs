mod error;
mod filter;
mod hash;
pub use error::{Error, Result};
