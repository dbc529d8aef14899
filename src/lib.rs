//! End-to-end tests and benches live in `tests/` and `benches/`.
