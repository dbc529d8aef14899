//! Shared constants of the control-plane integration tests.

/// A mock-mode admin token (`clientId platform--ops--console`, scope `tardis:admin:all`, env
/// `poc`); unsigned, accepted only with `--auth mock`.
pub const ADMIN: &str = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJjbGllbnRJZCI6InBsYXRmb3JtLS1vcHMtLWNvbnNvbGUiLCJzY29wZSI6InRhcmRpczphZG1pbjphbGwiLCJlbnYiOiJwb2MifQ.mock";
