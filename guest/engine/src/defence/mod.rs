//! What the write path guards against before a memory is stored: secrets and credentials kept
//! verbatim ([`secrets`]).

pub mod secrets;
