//! Memory that stays true: anchors to the code, checks against a working
//! tree, and the lifecycle (validity, confidence, review, archive).

mod anchors;
mod check;
mod confidence;
mod consolidate;
mod lifecycle;
mod links;
