//! Longest common subsequence of two byte strings (the LCS command): the
//! dynamic-programming table, the subsequence itself and the matching ranges.
