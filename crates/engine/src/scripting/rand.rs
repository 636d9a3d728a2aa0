//! Redis's `redisLrand48`/`redisSrand48` (rand.c): the generator behind a
//! script's `math.random`, so that `math.randomseed(n)` yields the same
//! sequence as on Redis, on every platform.

/// `lrand48` state: three 16-bit words, as Redis keeps them.
#[derive(Clone, Copy, Debug)]
pub struct Lrand48 {
    x: [u32; 3],
}

const MASK: u32 = 0xFFFF;
const A: [u32; 3] = [0xE66D, 0xDEEC, 0x5];
const C: u32 = 0xB;
/// Redis's `REDIS_LRAND48_MAX`.
pub const LRAND48_MAX: i32 = i32::MAX;

impl Default for Lrand48 {
    fn default() -> Self {
        Lrand48 { x: [0x330E, 0xABCD, 0x1234] }
    }
}

impl Lrand48 {
    /// `redisSrand48(seed)`.
    pub fn seed(&mut self, seed: i32) {
        let s = seed as u32;
        self.x = [0x330E, s & MASK, (s >> 16) & MASK];
    }

    /// `redisLrand48()`: the next value in `0..2^31`.
    pub fn next(&mut self) -> i32 {
        self.step();
        ((self.x[2] << 15).wrapping_add(self.x[1] >> 1)) as i32
    }

    fn step(&mut self) {
        let x = &mut self.x;
        let mul = |a: u32, b: u32| -> [u32; 2] {
            let l = (a as i32).wrapping_mul(b as i32) as u32;
            [l & MASK, (l >> 16) & MASK]
        };
        let carry = |a: u32, b: u32| -> u32 { ((a as i32 as i64 + b as i64) > MASK as i64) as u32 };
        let mut p = mul(A[0], x[0]);
        let carry0 = carry(p[0], C);
        p[0] = (p[0] + C) & MASK;
        let carry1 = carry(p[1], carry0);
        p[1] = (p[1] + carry0) & MASK;
        let q = mul(A[0], x[1]);
        let carry0 = carry(p[1], q[0]);
        p[1] = (p[1] + q[0]) & MASK;
        let r = mul(A[1], x[0]);
        let x2 = carry0
            .wrapping_add(carry1)
            .wrapping_add(carry(p[1], r[0]))
            .wrapping_add(q[1])
            .wrapping_add(r[1])
            .wrapping_add(A[0].wrapping_mul(x[2]))
            .wrapping_add(A[1].wrapping_mul(x[1]))
            .wrapping_add(A[2].wrapping_mul(x[0]));
        x[2] = x2 & MASK;
        x[1] = (p[1] + r[0]) & MASK;
        x[0] = p[0] & MASK;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_lrand48() {
        // POSIX lrand48 after srand48(0) and Redis's redisLrand48 agree.
        let mut r = Lrand48::default();
        r.seed(0);
        let got: Vec<i32> = (0..3).map(|_| r.next()).collect();
        assert_eq!(got, vec![366850414, 1610402240, 206956554]);
        r.seed(42);
        let got: Vec<i32> = (0..3).map(|_| r.next()).collect();
        assert_eq!(got, vec![1598855263, 735945821, 238553827]);
    }
}
