//! All integration tests in one binary (fast to link).

mod smoke;
