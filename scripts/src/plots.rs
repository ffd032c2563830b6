//! SVG plots — being written.
