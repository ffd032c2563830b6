//! CSV output — being written.
