//! Bitmap algorithms over byte strings, bit 0 being the most significant bit
//! of byte 0 as in Redis: population count, first set/clear bit, and the
//! signed/unsigned integer fields of BITFIELD with Redis's overflow rules.
