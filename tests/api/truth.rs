//! Memory that stays true: anchors to the code, checks against a working
//! tree, and the lifecycle (validity, confidence, review, archive).

mod anchors;
pub mod check;
mod confidence;
mod lifecycle;
mod links;
mod session_check;
