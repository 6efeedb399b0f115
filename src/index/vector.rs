//! Vector arithmetic: the dot product every similarity comes down to,
//! cosine, normalisation, and the closest of several queries.

/// Cosine similarity of two vectors of the same length, normalised or not.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let norms = (dot(a, a) * dot(b, b)).sqrt();
    if norms > 0.0 && norms.is_finite() {
        dot(a, b) / norms
    } else {
        0.0
    }
}

/// Scales `vector` to unit length in place; a zero vector stays zero (and
/// so matches nothing).
pub fn normalise(vector: &mut [f32]) {
    let norm = dot(vector, vector).sqrt();
    if norm > 0.0 && norm.is_finite() {
        for value in vector.iter_mut() {
            *value /= norm;
        }
    }
}

/// The dot product, written as eight independent lanes so the compiler
/// vectorises it without `unsafe` or target-specific code.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut sums = [0.0f32; LANES];
    let (a_head, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_head, b_tail) = b.split_at(a_head.len());
    for (a, b) in a_head.chunks_exact(LANES).zip(b_head.chunks_exact(LANES)) {
        for lane in 0..LANES {
            sums[lane] += a[lane] * b[lane];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(a, b)| a * b).sum();
    sums.iter().sum::<f32>() + tail
}

/// The query closest to `vector` (a stored, unit-length vector) and its
/// cosine; `None` without queries. Clamped to -1..1: a vector stored in
/// half precision is of unit length within 2⁻¹¹, so a memory compared with
/// its own vector could otherwise score a hair above 1.
pub(super) fn best_of(queries: &[Vec<f32>], vector: &[f32]) -> Option<(usize, f32)> {
    queries
        .iter()
        .map(|query| dot(query, vector).clamp(-1.0, 1.0))
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
}
