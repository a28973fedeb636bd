//! What every catalog operation shares: the ports, the clock, the sealer and the limits, built
//! once by one builder.

pub mod bucket_keys;
