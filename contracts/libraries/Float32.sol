// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

/// @title Float32 — IEEE-754 binary32 arithmetic on raw bit patterns (docs/PROTOCOL.md §1)
/// @notice Every value is a `uint32` holding a binary32 bit pattern. Every operation is correctly
///         rounded (round-to-nearest, ties-to-even), keeps subnormals (no flush-to-zero), follows
///         IEEE-754 for ±0 and ±inf, and returns the canonical NaN 0x7FC00000 for every NaN result.
///         Every 32-bit pattern is a valid input: no function reverts or loops.
/// @dev Core arithmetic is inline assembly (one block per operation, no memory use). Inside the
///      blocks a finite operand is decoded as `m * 2^(e - 150)` with `m` the 24-bit significand
///      (implicit bit set for normals) and `e` the biased exponent (1 for subnormals), the exact
///      result is formed as an integer `x * 2^k` in a 256-bit word, and `_round` packs it into a
///      binary32 with one correct rounding. All shifts and sums below are bounded far under 2^256
///      (bounds stated next to each), so no EVM arithmetic can wrap.
library Float32 {
    /// @notice The canonical quiet NaN; every NaN result of this library is exactly this pattern.
    uint32 internal constant NAN = 0x7FC00000;
    /// @notice +infinity.
    uint32 internal constant POS_INF = 0x7F800000;
    /// @notice −infinity.
    uint32 internal constant NEG_INF = 0xFF800000;
    /// @notice +0.0.
    uint32 internal constant ZERO = 0x00000000;
    /// @notice −0.0.
    uint32 internal constant NEG_ZERO = 0x80000000;
    /// @notice 1.0.
    uint32 internal constant ONE = 0x3F800000;
    /// @notice 2.0.
    uint32 internal constant TWO = 0x40000000;
    /// @notice 0.5.
    uint32 internal constant HALF = 0x3F000000;
    /// @notice The sign bit.
    uint32 internal constant SIGN_MASK = 0x80000000;
    /// @notice Everything but the sign bit (|x| as a pattern).
    uint32 internal constant ABS_MASK = 0x7FFFFFFF;

    // ---------------------------------------------------------------------------------------
    // Arithmetic
    // ---------------------------------------------------------------------------------------

    /// @notice fl(a + b).
    /// @param a Left operand (binary32 bits).
    /// @param b Right operand (binary32 bits).
    /// @return r The correctly rounded sum; canonical NaN for NaN operands and inf + (−inf).
    function add(uint32 a, uint32 b) internal pure returns (uint32 r) {
        assembly ("memory-safe") {
            // _round(x, k): binary32 bits of |x * 2^k| rounded to nearest-even (x > 0, x < 2^128,
            // -400 < k < 400). Shared verbatim by add/mul/div/fromInt (Yul has no cross-block
            // functions).
            function _round(x, k) -> bits {
                // p = floor(log2 x) by binary search over 128 bits (6 halvings + last bit).
                let y := x
                let f := shl(6, gt(y, 0xFFFFFFFFFFFFFFFF)) // 64 if x >= 2^64
                y := shr(f, y)
                let p := f
                f := shl(5, gt(y, 0xFFFFFFFF)) // 32 if the rest >= 2^32
                y := shr(f, y)
                p := or(p, f)
                f := shl(4, gt(y, 0xFFFF)) // 16
                y := shr(f, y)
                p := or(p, f)
                f := shl(3, gt(y, 0xFF)) // 8
                y := shr(f, y)
                p := or(p, f)
                f := shl(2, gt(y, 0xF)) // 4
                y := shr(f, y)
                p := or(p, f)
                f := shl(1, gt(y, 0x3)) // 2
                y := shr(f, y)
                p := or(p, or(f, gt(y, 1))) // + 1 if the last two bits are 0b1x
                // s = number of low bits of x dropped: keep 24 significant bits (normal result)
                // but never go below the subnormal quantum 2^-149, i.e. s >= -149 - k.
                let s := sub(p, 23)
                let t := sub(not(148), k) // not(148) = -149 in two's complement
                if slt(s, t) { s := t }
                switch sgt(s, 0)
                case 1 {
                    // Round-half-even right shift: (x + 2^(s-1) - 1 + lsb) >> s, lsb = bit s of
                    // x. s <= 400 keeps every term < 2^256; shl/shr by >= 256 yield 0.
                    x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1))))
                }
                default { x := shl(sub(0, s), x) } // exact: fewer than 24 bits, widen
                // The LSB of x now weighs 2^(s + k); biased exponent field = s + k + 149 plus the
                // implicit bit of x (x in [2^23, 2^24] for normals, x < 2^23 for subnormals, a
                // carry to 2^24 from rounding bumps the exponent, as it must). s + k + 149 >= 0.
                bits := add(shl(23, add(add(s, k), 149)), x)
                if gt(bits, 0x7F7FFFFF) { bits := 0x7F800000 } // overflow -> inf
            }
            a := and(a, 0xFFFFFFFF) // clean possible dirty high bits of the uint32 slots
            b := and(b, 0xFFFFFFFF)
            let ax := and(a, 0x7FFFFFFF) // |a| as a pattern; pattern order = magnitude order
            let bx := and(b, 0x7FFFFFFF)
            if lt(ax, bx) {
                // order so that |a| >= |b| (NaNs sort above inf); the result takes a's sign
                let tmp := a
                a := b
                b := tmp
                tmp := ax
                ax := bx
                bx := tmp
            }
            let ea := shr(23, ax) // biased exponent 0..255; ea >= eb
            let eb := shr(23, bx)
            switch and(gt(eb, 0), lt(ea, 255)) // both normal (finite, nonzero, not subnormal)?
            case 1 {
                // Fast path. Significands with the implicit bit, in [2^23, 2^24).
                let ma := or(and(ax, 0x7FFFFF), 0x800000)
                let mb := or(and(bx, 0x7FFFFF), 0x800000)
                let d := sub(ea, eb)
                // Beyond 40 binades b is below 2^-16 ulp(a): it can only act as a sticky bit,
                // and moving it up to 2^-40 relative to a keeps it one, so no result changes.
                if gt(d, 40) { d := 40 }
                let x := shl(d, ma) // < 2^64; x's LSB weighs 2^(ea - d - 150)
                switch and(xor(a, b), 0x80000000)
                case 0 {
                    // Same signs: x in [2^(23+d), 2^(25+d)), c = 1 iff it carried to bit 24+d.
                    x := add(x, mb)
                    let c := shr(add(d, 24), x)
                    let s := add(d, c) // bits to drop to keep 24; >= 1 (d = 0 always carries)
                    // round-half-even shift: (x + 2^(s-1) - 1 + bit s of x) >> s, all < 2^66
                    // Yul shl(shift, value) is 1 << (s - 1); slither misreads the operand order.
                    // slither-disable-next-line incorrect-shift
                    x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1))))
                    // x in [2^23, 2^24] weighs 2^(ea + c - 150): exponent field ea + c - 1 plus
                    // the implicit bit (a rounding carry to 2^24 bumps the exponent, as it must)
                    r := add(shl(23, sub(add(ea, c), 1)), x)
                    if gt(r, 0x7F7FFFFF) { r := 0x7F800000 } // overflow -> inf
                    r := or(r, and(a, 0x80000000))
                }
                default {
                    x := sub(x, mb) // >= 0 as |a| >= |b|
                    switch gt(d, 1)
                    case 1 {
                        // d >= 2: x in (2^(22+d), 2^(24+d)), at most one bit cancels;
                        // c = 1 iff bit 23+d is set. The result is normal (>= |a|/2, ea >= 3).
                        let c := shr(add(d, 23), x)
                        let s := add(sub(d, 1), c) // >= 1
                        // Yul shl(shift, value) is 1 << (s - 1); slither misreads the operand order.
                        // slither-disable-next-line incorrect-shift
                        x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1))))
                        // x weighs 2^(ea + c - 151): exponent field ea + c - 2 + implicit bit
                        r := or(add(shl(23, sub(add(ea, c), 2)), x), and(a, 0x80000000))
                    }
                    default {
                        // d <= 1: x < 2^25 may have cancelled to any size; exact 0 is +0
                        if x { r := or(_round(x, sub(eb, 150)), and(a, 0x80000000)) }
                    }
                }
            }
            default {
                switch lt(ea, 255)
                case 1 {
                    // Both finite, some zero or subnormal: the general exact path.
                    // Subnormals have significand without implicit bit and effective exponent 1.
                    let ma := or(and(ax, 0x7FFFFF), shl(23, gt(ea, 0)))
                    let mb := or(and(bx, 0x7FFFFF), shl(23, gt(eb, 0)))
                    let d := sub(add(ea, iszero(ea)), add(eb, iszero(eb))) // <= 253
                    if gt(d, 40) { d := 40 } // as in the fast path
                    let x := shl(d, ma) // < 2^64
                    switch and(xor(a, b), 0x80000000)
                    case 0 { x := add(x, mb) } // < 2^65
                    default { x := sub(x, mb) } // >= 0 as |a| >= |b|
                    switch x
                    case 0 { r := and(and(a, b), 0x80000000) } // exact zero: −0 only for −0 + −0
                    default {
                        r := or(_round(x, sub(sub(add(ea, iszero(ea)), d), 150)),
                            and(a, 0x80000000))
                    }
                }
                default {
                    // |a| is inf or NaN (NaN sorts above inf, so a NaN b implies a NaN a)
                    r := 0x7FC00000
                    if eq(ax, 0x7F800000) {
                        // a = ±inf: a, unless b is the opposite infinity
                        if or(iszero(eq(bx, 0x7F800000)), eq(a, b)) { r := a }
                    }
                }
            }
        }
    }

    /// @notice fl(a − b), i.e. a + (−b) with b's sign flipped.
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The correctly rounded difference (fl(x − x) = +0).
    function sub(uint32 a, uint32 b) internal pure returns (uint32) {
        // Flipping the sign bit of a NaN keeps it a NaN, so NaN handling is add's.
        return add(a, b ^ SIGN_MASK);
    }

    /// @notice fl(a × b).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return r The correctly rounded product; canonical NaN for NaN operands and 0 × inf.
    function mul(uint32 a, uint32 b) internal pure returns (uint32 r) {
        assembly ("memory-safe") {
            function _round(x, k) -> bits {
                // identical to add's _round; see the comments there
                let y := x
                let f := shl(6, gt(y, 0xFFFFFFFFFFFFFFFF))
                y := shr(f, y)
                let p := f
                f := shl(5, gt(y, 0xFFFFFFFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(4, gt(y, 0xFFFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(3, gt(y, 0xFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(2, gt(y, 0xF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(1, gt(y, 0x3))
                y := shr(f, y)
                p := or(p, or(f, gt(y, 1)))
                let s := sub(p, 23)
                let t := sub(not(148), k)
                if slt(s, t) { s := t }
                switch sgt(s, 0)
                case 1 { x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1)))) }
                default { x := shl(sub(0, s), x) }
                bits := add(shl(23, add(add(s, k), 149)), x)
                if gt(bits, 0x7F7FFFFF) { bits := 0x7F800000 }
            }
            let ax := and(a, 0x7FFFFFFF)
            let bx := and(b, 0x7FFFFFFF)
            let sign := and(xor(a, b), 0x80000000) // sign of every non-NaN result
            let ea := shr(23, ax)
            let eb := shr(23, bx)
            // both normal? (e - 1 wraps to a huge value for e = 0)
            switch and(lt(sub(ea, 1), 254), lt(sub(eb, 1), 254))
            case 1 {
                // exact product of two 24-bit significands: x in [2^46, 2^48)
                let x := mul(or(and(ax, 0x7FFFFF), 0x800000), or(and(bx, 0x7FFFFF), 0x800000))
                let c := shr(47, x) // 1 iff the product's top bit is 47
                // biased exponent of the result before rounding; in [-125, 382], signed
                let e := sub(add(add(ea, eb), c), 127)
                switch sgt(e, 0)
                case 1 {
                    let s := add(23, c) // bits to drop to keep 24
                    // round-half-even shift (x + 2^(s-1) - 1 + bit s of x) >> s, < 2^49
                    // Yul shl(shift, value) is 1 << (s - 1); slither misreads the operand order.
                    // slither-disable-next-line incorrect-shift
                    x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1))))
                    r := add(shl(23, sub(e, 1)), x) // implicit bit of x adds 1 to the field
                    if gt(r, 0x7F7FFFFF) { r := 0x7F800000 } // overflow -> inf
                    r := or(r, sign)
                }
                default {
                    // subnormal or zero result: general rounding, scale 2^(ea + eb - 300)
                    r := or(_round(x, sub(add(ea, eb), 300)), sign)
                }
            }
            default {
                switch or(gt(ea, 254), gt(eb, 254)) // any inf or NaN?
                case 0 {
                    switch or(iszero(ax), iszero(bx))
                    case 1 { r := sign } // exact signed zero
                    default {
                        // some subnormal operand: significand without implicit bit, exp 1
                        let ma := or(and(ax, 0x7FFFFF), shl(23, gt(ea, 0)))
                        let mb := or(and(bx, 0x7FFFFF), shl(23, gt(eb, 0)))
                        // exact product < 2^48 at scale 2^(ea_eff - 150 + eb_eff - 150)
                        r := or(_round(mul(ma, mb), sub(add(add(ea, iszero(ea)),
                            add(eb, iszero(eb))), 300)), sign)
                    }
                }
                default {
                    // inf × nonzero = signed inf; NaN operand or inf × 0 = NaN
                    r := or(sign, 0x7F800000)
                    if or(or(gt(ax, 0x7F800000), gt(bx, 0x7F800000)),
                        or(iszero(ax), iszero(bx))) { r := 0x7FC00000 }
                }
            }
        }
    }

    /// @notice fl(a ÷ b).
    /// @param a Dividend.
    /// @param b Divisor.
    /// @return r The correctly rounded quotient; x/±0 = ±inf for x ≠ 0, canonical NaN for NaN
    ///         operands, 0/0 and inf/inf.
    function div(uint32 a, uint32 b) internal pure returns (uint32 r) {
        assembly ("memory-safe") {
            function _round(x, k) -> bits {
                // identical to add's _round; see the comments there
                let y := x
                let f := shl(6, gt(y, 0xFFFFFFFFFFFFFFFF))
                y := shr(f, y)
                let p := f
                f := shl(5, gt(y, 0xFFFFFFFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(4, gt(y, 0xFFFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(3, gt(y, 0xFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(2, gt(y, 0xF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(1, gt(y, 0x3))
                y := shr(f, y)
                p := or(p, or(f, gt(y, 1)))
                let s := sub(p, 23)
                let t := sub(not(148), k)
                if slt(s, t) { s := t }
                switch sgt(s, 0)
                case 1 { x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1)))) }
                default { x := shl(sub(0, s), x) }
                bits := add(shl(23, add(add(s, k), 149)), x)
                if gt(bits, 0x7F7FFFFF) { bits := 0x7F800000 }
            }
            let ax := and(a, 0x7FFFFFFF)
            let bx := and(b, 0x7FFFFFFF)
            let sign := and(xor(a, b), 0x80000000)
            let ea := shr(23, ax)
            let eb := shr(23, bx)
            switch and(lt(sub(ea, 1), 254), lt(sub(eb, 1), 254)) // both normal?
            case 1 {
                let mb := or(and(bx, 0x7FFFFF), 0x800000)
                let n := shl(26, or(and(ax, 0x7FFFFF), 0x800000)) // ma * 2^26 < 2^50
                // q = floor(ma 2^26 / mb) in [2^25, 2^27) as ma/mb in (1/2, 2); x = 2q + sticky
                // with the sticky bit 1 iff inexact: it sits below the rounding point (>= 3
                // bits are dropped), so rounding x is rounding the exact quotient.
                let x := or(shl(1, div(n, mb)), gt(mod(n, mb), 0))
                let c := shr(27, x) // x in [2^26, 2^28): top bit 26 + c
                let e := add(sub(ea, eb), add(126, c)) // biased exponent, in [-127, 380]
                switch sgt(e, 0)
                case 1 {
                    let s := add(3, c) // bits to drop to keep 24
                    // Yul shl(shift, value) is 1 << (s - 1); slither misreads the operand order.
                    // slither-disable-next-line incorrect-shift
                    x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1))))
                    r := add(shl(23, sub(e, 1)), x)
                    if gt(r, 0x7F7FFFFF) { r := 0x7F800000 } // overflow -> inf
                    r := or(r, sign)
                }
                default {
                    // subnormal or zero result; value = x 2^(ea - eb - 27)
                    r := or(_round(x, sub(sub(ea, eb), 27)), sign)
                }
            }
            default {
                // finite nonzero / finite nonzero with a subnormal operand is general
                switch or(or(gt(ea, 254), gt(eb, 254)), or(iszero(ax), iszero(bx)))
                case 0 {
                    let ma := or(and(ax, 0x7FFFFF), shl(23, gt(ea, 0)))
                    let mb := or(and(bx, 0x7FFFFF), shl(23, gt(eb, 0)))
                    let n := shl(64, ma) // < 2^88; quotient n / mb is in [2^40, 2^88)
                    // 2q + sticky: q has >= 41 bits and 24 are kept, so the sticky bit is below
                    // the rounding point.
                    let x := or(shl(1, div(n, mb)), gt(mod(n, mb), 0))
                    r := or(_round(x, sub(sub(add(ea, iszero(ea)), add(eb, iszero(eb))), 65)),
                        sign)
                }
                default {
                    switch or(gt(ax, 0x7F800000), gt(bx, 0x7F800000))
                    case 1 { r := 0x7FC00000 } // NaN operand
                    default {
                        switch eq(ax, 0x7F800000)
                        case 1 {
                            r := or(sign, 0x7F800000) // inf / finite = inf
                            if eq(bx, 0x7F800000) { r := 0x7FC00000 } // inf / inf
                        }
                        default {
                            switch iszero(bx)
                            case 1 {
                                r := or(sign, 0x7F800000) // nonzero / 0 = inf
                                if iszero(ax) { r := 0x7FC00000 } // 0 / 0
                            }
                            default { r := sign } // 0 / y or x / inf = signed zero
                        }
                    }
                }
            }
        }
    }

    /// @notice IEEE square root, correctly rounded (ties to even; a tie cannot occur), exact on
    ///         subnormal operands: sqrt(±0) = ±0, sqrt(+inf) = +inf, and a NaN or any operand
    ///         below zero (−inf included) gives the canonical NaN.
    /// @dev Bounded: a fixed four-step integer Newton iteration, no loop over data. A positive
    ///      finite operand is m·2^(e−150) with m normalised into [2^23, 2^24) (a subnormal is
    ///      shifted up and e lowered to match), then m doubled and e lowered by one if e − 150 is
    ///      odd, so that sqrt = sqrt(m·2^28)·2^((e−150)/2 − 14) with n = m·2^28 in [2^51, 2^53).
    ///      y = floor(sqrt(n)) (27 bits at most) and x = 2y + (y² < n) is the exact root scaled
    ///      by 2 with a sticky bit below the 3–4 bits that rounding drops, so rounding x is
    ///      rounding the exact root. The root of a finite binary32 lies in [2^−74.5, 2^64): always
    ///      normal, never overflowing, so the packing needs no subnormal or infinity case.
    /// @param a Operand (binary32 bits).
    /// @return r The binary32 square root.
    function sqrt(uint32 a) internal pure returns (uint32 r) {
        if (a & ABS_MASK == 0) return a; // ±0 keeps its sign (IEEE 754 §6.3)
        if (a > POS_INF) return NAN; // a NaN, or the sign bit set on a nonzero operand
        if (a == POS_INF) return POS_INF;
        assembly ("memory-safe") {
            let e := shr(23, a) // 0..254: a is positive and finite here
            let m := and(a, 0x7FFFFF)
            switch e
            case 0 {
                // subnormal (m > 0): p = floor(log2 m) in [0, 22] by binary search
                let y := m
                let f := shl(4, gt(y, 0xFFFF))
                y := shr(f, y)
                let p := f
                f := shl(3, gt(y, 0xFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(2, gt(y, 0xF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(1, gt(y, 0x3))
                y := shr(f, y)
                p := or(p, or(f, gt(y, 1)))
                m := shl(sub(23, p), m) // now in [2^23, 2^24), the value is m 2^(e - 150)
                e := sub(p, 22) // with e = 1 - (23 - p) in [-22, 0] (two's complement)
            }
            default { m := or(m, 0x800000) }
            let odd := and(e, 1) // parity of e − 150 (two's complement keeps the low bit)
            m := shl(odd, m) // [2^23, 2^25)
            e := sub(e, odd) // even
            let n := shl(28, m) // [2^51, 2^53)
            // floor(sqrt(n)): Newton steps y <- floor((y + floor(n / y)) / 2) from y = 2^26.
            // Every step gives y >= floor(sqrt(n)) (AM-GM), and from floor(sqrt(n)) at most one
            // above; 2^26 / sqrt(n) lies in (2^-0.5, 2^0.5], so the exact iteration's relative
            // error after four steps is below 1.2e-12 (< 1e-4 absolute): y is then
            // floor(sqrt(n)) or one above, and one downward correction makes it exact.
            let y := shl(26, 1)
            y := shr(1, add(y, div(n, y)))
            y := shr(1, add(y, div(n, y)))
            y := shr(1, add(y, div(n, y)))
            y := shr(1, add(y, div(n, y)))
            if gt(mul(y, y), n) { y := sub(y, 1) }
            // x = 2y + sticky in [2^26, 2^28): its top bit is 26 + c, so s = 3 + c bits drop
            let x := or(shl(1, y), lt(mul(y, y), n))
            let s := add(3, shr(27, x))
            // round-half-even shift (x + 2^(s-1) - 1 + bit s of x) >> s, in [2^23, 2^24]
            // Yul shl(shift, value) is 1 << (s - 1); slither misreads the operand order.
            // slither-disable-next-line incorrect-shift
            x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1))))
            // x weighs 2^((e − 150)/2 − 15 + s): the biased exponent field is
            // (e − 150)/2 + 135 + s = (e + 120)/2 + s; adding x (implicit bit included, a
            // rounding carry to 2^24 bumps the exponent) means field − 1 = (e + 118)/2 + s.
            // e + 118 >= 96 > 0, so the halving is an unsigned shift.
            r := add(shl(23, add(shr(1, add(e, 118)), s)), x)
        }
    }

    // ---------------------------------------------------------------------------------------
    // Classification and comparison
    // ---------------------------------------------------------------------------------------

    /// @notice True iff `a` is a NaN (any sign and payload).
    /// @param a Operand.
    /// @return Whether `a` is NaN.
    function isNaN(uint32 a) internal pure returns (bool) {
        return a & ABS_MASK > POS_INF;
    }

    /// @notice True iff `a` is ±inf.
    /// @param a Operand.
    /// @return Whether `a` is infinite.
    function isInf(uint32 a) internal pure returns (bool) {
        return a & ABS_MASK == POS_INF;
    }

    /// @notice True iff `a` is a subnormal (nonzero with a zero exponent field).
    /// @param a Operand.
    /// @return Whether `a` is subnormal.
    function isSubnormal(uint32 a) internal pure returns (bool) {
        uint32 ax = a & ABS_MASK;
        return ax != 0 && ax < 0x00800000;
    }

    /// @notice `a` with every NaN replaced by the canonical 0x7FC00000 (PROTOCOL §1).
    /// @param a Operand.
    /// @return `a`, or NAN if `a` is a NaN.
    function canonical(uint32 a) internal pure returns (uint32) {
        return a & ABS_MASK > POS_INF ? NAN : a;
    }

    /// @notice −a (sign flip; NaN stays the canonical NaN).
    /// @param a Operand.
    /// @return The negation.
    function neg(uint32 a) internal pure returns (uint32) {
        return a & ABS_MASK > POS_INF ? NAN : a ^ SIGN_MASK;
    }

    /// @notice |a| (sign cleared; NaN gives the canonical NaN).
    /// @param a Operand.
    /// @return The absolute value.
    function abs(uint32 a) internal pure returns (uint32) {
        return a & ABS_MASK > POS_INF ? NAN : a & ABS_MASK;
    }

    /// @dev Maps a non-NaN pattern to an integer with the same order as its value (−0 and +0
    ///      map to the same key). Result in [2^31 − 0x7F800000, 2^31 + 0x7F800000], no wrap.
    function _key(uint32 a) private pure returns (uint256) {
        uint256 ax = a & ABS_MASK;
        unchecked {
            // ax <= 0x7F800000 < 2^31 for non-NaN input, so neither side wraps.
            return a & SIGN_MASK != 0 ? (uint256(1) << 31) - ax : (uint256(1) << 31) + ax;
        }
    }

    /// @notice a > b (false if either is NaN; +0 > −0 is false).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The IEEE comparison result.
    function gt(uint32 a, uint32 b) internal pure returns (bool) {
        if (isNaN(a) || isNaN(b)) return false;
        return _key(a) > _key(b);
    }

    /// @notice a < b (false if either is NaN).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The IEEE comparison result.
    function lt(uint32 a, uint32 b) internal pure returns (bool) {
        return gt(b, a);
    }

    /// @notice a >= b (false if either is NaN; +0 >= −0 is true).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The IEEE comparison result.
    function ge(uint32 a, uint32 b) internal pure returns (bool) {
        if (isNaN(a) || isNaN(b)) return false;
        return _key(a) >= _key(b);
    }

    /// @notice a <= b (false if either is NaN).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The IEEE comparison result.
    function le(uint32 a, uint32 b) internal pure returns (bool) {
        return ge(b, a);
    }

    /// @notice Semantic equality a == b: false if either is NaN, true for +0 == −0.
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The IEEE comparison result.
    function eq(uint32 a, uint32 b) internal pure returns (bool) {
        if (isNaN(a) || isNaN(b)) return false;
        return a == b || (a | b) & ABS_MASK == 0;
    }

    /// @notice One step of row_max (PROTOCOL §2): NaN if either operand is NaN, else
    ///         `b > m ? b : m`. Ties (including +0 vs −0) keep the running maximum `m`.
    /// @param m Running maximum (the earlier element).
    /// @param b Next element.
    /// @return The new running maximum.
    function max(uint32 m, uint32 b) internal pure returns (uint32) {
        if (isNaN(m) || isNaN(b)) return NAN;
        return _key(b) > _key(m) ? b : m;
    }

    /// @notice The v3 `maximum` operator (PROTOCOL §2.6): NaN if a or b is NaN, else
    ///         `a > b ? a : b`, so a tie gives b (maximum(+0, −0) = −0, maximum(−0, +0) = +0).
    /// @dev This is `max` with its operands swapped (max(m, b) keeps m on a tie); one rule,
    ///      not two copies of it.
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The maximum (canonical NaN for a NaN operand).
    function maximum(uint32 a, uint32 b) internal pure returns (uint32) {
        return max(b, a);
    }

    /// @notice The v3 `minimum` operator (PROTOCOL §2.6): NaN if a or b is NaN, else
    ///         `a < b ? a : b`, so a tie gives b (minimum(+0, −0) = −0, minimum(−0, +0) = +0).
    /// @param a Left operand.
    /// @param b Right operand.
    /// @return The minimum (canonical NaN for a NaN operand).
    function minimum(uint32 a, uint32 b) internal pure returns (uint32) {
        if (isNaN(a) || isNaN(b)) return NAN;
        return _key(a) < _key(b) ? a : b;
    }

    // ---------------------------------------------------------------------------------------
    // Bit manipulation for exp32 / log32 (PROTOCOL §1, §2.1, §2.2)
    // ---------------------------------------------------------------------------------------

    /// @notice The biased exponent field, bits 30..23 (0 for ±0/subnormals, 255 for inf/NaN).
    /// @param a Operand.
    /// @return The 8-bit exponent field.
    function exponentField(uint32 a) internal pure returns (uint32) {
        return (a >> 23) & 0xFF;
    }

    /// @notice The 23-bit fraction (mantissa) field, bits 22..0.
    /// @param a Operand.
    /// @return The fraction field.
    function mantissaField(uint32 a) internal pure returns (uint32) {
        return a & 0x007FFFFF;
    }

    /// @notice rint(a): round to the nearest integral value, ties to even (exact).
    /// @dev ±0, ±inf and values with |a| >= 2^23 (already integral) are returned unchanged;
    ///      |a| < 0.5 gives a zero of a's sign (−0.4 → −0); NaN gives the canonical NaN.
    /// @param a Operand.
    /// @return The integral binary32 nearest to `a`.
    function rint(uint32 a) internal pure returns (uint32) {
        uint32 ax = a & ABS_MASK;
        if (ax > POS_INF) return NAN;
        uint32 e = ax >> 23;
        if (e >= 150) return a; // |a| >= 2^23: integral (or inf)
        uint32 sign = a & SIGN_MASK;
        if (e < 126) return sign; // |a| < 0.5
        unchecked {
            // 126 <= e <= 149: |a| = m * 2^(e-150), m < 2^24, s = 150 - e in [1, 24]; the
            // round-half-even shift below stays < 2^26 and the integer n <= 2^23.
            uint256 m = (ax & 0x7FFFFF) | 0x800000;
            uint256 s = 150 - e;
            uint256 n = (m + (uint256(1) << (s - 1)) - 1 + ((m >> s) & 1)) >> s;
            if (n == 0) return sign;
            return fromUint(n) | sign;
        }
    }

    /// @notice Exact integer value of a finite `a`, truncated toward zero if not integral.
    /// @dev Every finite binary32 is below 2^128 in magnitude, so the result always fits.
    ///      Total on all patterns: NaN → 0 and ±inf → ±2^128 (values no finite input yields).
    /// @param a Operand.
    /// @return The integer.
    function toInt(uint32 a) internal pure returns (int256) {
        uint32 ax = a & ABS_MASK;
        if (ax > POS_INF) return 0;
        uint256 e = ax >> 23;
        uint256 mag;
        if (e == 255) {
            mag = uint256(1) << 128;
        } else {
            uint256 m = e == 0 ? ax : (ax & 0x7FFFFF) | 0x800000;
            unchecked {
                // e <= 254: m << (e - 150) < 2^24 * 2^104 = 2^128; e < 150 shifts right.
                mag = e >= 150 ? m << (e - 150) : m >> (150 - (e == 0 ? 1 : e));
            }
        }
        // mag <= 2^128 < 2^255: the int256 cast and the negation cannot overflow.
        return a & SIGN_MASK != 0 ? -int256(mag) : int256(mag);
    }

    /// @notice Correctly rounded conversion of an unsigned integer to binary32 (exact below
    ///         2^24; values from 2^128 − 2^103 up round to +inf).
    /// @param n The integer.
    /// @return r The binary32 nearest to n (ties to even).
    function fromUint(uint256 n) internal pure returns (uint32 r) {
        if (n == 0) return ZERO;
        if (n >= uint256(1) << 128) return POS_INF;
        assembly ("memory-safe") {
            function _round(x, k) -> bits {
                // identical to add's _round; see the comments there (x < 2^128 checked above)
                let y := x
                let f := shl(6, gt(y, 0xFFFFFFFFFFFFFFFF))
                y := shr(f, y)
                let p := f
                f := shl(5, gt(y, 0xFFFFFFFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(4, gt(y, 0xFFFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(3, gt(y, 0xFF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(2, gt(y, 0xF))
                y := shr(f, y)
                p := or(p, f)
                f := shl(1, gt(y, 0x3))
                y := shr(f, y)
                p := or(p, or(f, gt(y, 1)))
                let s := sub(p, 23)
                let t := sub(not(148), k)
                if slt(s, t) { s := t }
                switch sgt(s, 0)
                case 1 { x := shr(s, add(x, add(sub(shl(sub(s, 1), 1), 1), and(shr(s, x), 1)))) }
                default { x := shl(sub(0, s), x) }
                bits := add(shl(23, add(add(s, k), 149)), x)
                if gt(bits, 0x7F7FFFFF) { bits := 0x7F800000 }
            }
            r := _round(n, 0)
        }
    }

    /// @notice Correctly rounded conversion of a signed integer to binary32.
    /// @param n The integer.
    /// @return The binary32 nearest to n (ties to even); fromInt(0) = +0.
    function fromInt(int256 n) internal pure returns (uint32) {
        if (n >= 0) return fromUint(uint256(n));
        unchecked {
            // two's-complement magnitude; for type(int256).min this is 2^255, which fromUint
            // maps to inf like any magnitude >= 2^128.
            return fromUint(uint256(-(n + 1)) + 1) | SIGN_MASK;
        }
    }

    /// @notice The v3 `cast_i32` operator: f32 → i32 truncating toward zero, as the
    ///         two's-complement word. NaN, ±inf and every value whose truncation is outside
    ///         [−2^31, 2^31 − 1] give 0x80000000, the "integer indefinite" of x86's cvttss2si
    ///         that torch's `.to(torch.int32)` returns there (PROTOCOL §2.6).
    /// @param a Operand (binary32 bits).
    /// @return The i32 word.
    function toI32(uint32 a) internal pure returns (uint32) {
        if (isNaN(a)) return SIGN_MASK; // toInt maps NaN to 0; cast_i32 does not
        int256 n = toInt(a); // ±inf come back as ±2^128: out of range below
        if (n < type(int32).min) return SIGN_MASK;
        if (n > type(int32).max) return SIGN_MASK;
        return uint32(int32(n));
    }

    /// @notice The v3 `cast_f32` operator: the i32 held in a two's-complement word → binary32,
    ///         round to nearest even (exact for |n| <= 2^24).
    /// @param word The i32 as a uint32 word (0x80000000 is −2^31).
    /// @return The binary32 bits.
    function fromI32(uint32 word) internal pure returns (uint32) {
        return fromInt(int32(word));
    }

    /// @notice 2^n exactly: for n in [−126, 127] the pattern (n + 127) << 23 (PROTOCOL §1);
    ///         extended exactly to subnormals for n in [−149, −127], +0 below, +inf above 127.
    /// @param n The exponent.
    /// @return The binary32 power of two.
    function pow2(int256 n) internal pure returns (uint32) {
        if (n > 127) return POS_INF;
        if (n >= -126) return uint32(uint256(n + 127)) << 23; // n + 127 in [1, 254]
        if (n >= -149) return uint32(1) << uint256(n + 149); // subnormal, bit n + 149 in [0, 22]
        return ZERO;
    }
}
