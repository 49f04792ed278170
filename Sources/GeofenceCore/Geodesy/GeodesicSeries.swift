/// The series expansions of Karney's geodesic solution, truncated at sixth order.
///
/// A geodesic is mapped to a great circle on an auxiliary sphere; distance s and longitude λ along it
/// are integrals of the arc length σ on that sphere, which Karney expands in the small parameters
/// ε = (√(1 + k²) − 1) / (√(1 + k²) + 1), k = e′ cos α₀ (α₀ the azimuth where the geodesic crosses the
/// equator) and n, the third flattening:
///
///     s / b = A₁ (σ + Σₗ C₁ₗ sin 2lσ)                        (distance, Karney 2013 eqs. 15–18)
///     J(σ) = (A₁ − A₂) σ + Σₗ (A₁C₁ₗ − A₂C₂ₗ) sin 2lσ         (reduced length, eqs. 38–42)
///     λ = ω − f sin α₀ A₃ (σ + Σₗ C₃ₗ sin 2lσ)                  (longitude, eqs. 23–25)
///
/// With ε ≤ 0.0017 on WGS84, sixth order leaves truncation errors near 1e-18 relative, below the
/// rounding of a double, which is why GeographicLib settles on it.
///
/// Coefficient tables are packed as GeographicLib packs them: for each series term, the integer
/// coefficients of a polynomial (highest power first) followed by its integer denominator.
enum GeodesicSeries {
    static let order = 6

    /// Coefficients of one series in sin 2lσ, l = 1…`order`; index 0 is unused so indices match l.
    typealias Terms = InlineArray<7, Double>

    // MARK: Distance (A₁, C₁) and reduced length (A₂, C₂): polynomials in ε only.

    private static var a1Packed: InlineArray<5, Double> { [1, 4, 64, 0, 256] }

    /// A₁ − 1, kept separate from the 1 so its tiny value keeps full relative precision.
    static func a1Minus1(_ eps: Double) -> Double {
        let t = polynomial(degree: 3, a1Packed, from: 0, eps * eps) / a1Packed[4]
        return (t + eps) / (1 - eps)
    }

    private static var c1Packed: InlineArray<18, Double> {
        [
            -1, 6, -16, 32,
            -9, 64, -128, 2048,
            9, -16, 768,
            3, -5, 512,
            -7, 1280,
            -7, 2048,
        ]
    }

    /// C₁ₗ for l = 1…6.
    static func c1(_ eps: Double) -> Terms { evenOddTerms(c1Packed, eps) }

    private static var a2Packed: InlineArray<5, Double> { [-11, -28, -192, 0, 256] }

    /// A₂ − 1.
    static func a2Minus1(_ eps: Double) -> Double {
        let t = polynomial(degree: 3, a2Packed, from: 0, eps * eps) / a2Packed[4]
        return (t - eps) / (1 + eps)
    }

    private static var c2Packed: InlineArray<18, Double> {
        [
            1, 2, 16, 32,
            35, 64, 384, 2048,
            15, 80, 768,
            7, 35, 512,
            63, 1280,
            77, 2048,
        ]
    }

    /// C₂ₗ for l = 1…6.
    static func c2(_ eps: Double) -> Terms { evenOddTerms(c2Packed, eps) }

    /// Evaluates C₁ or C₂: term l is εˡ times a polynomial in ε² of degree ⌊(6 − l)/2⌋, because
    /// these series contain only every other power of ε.
    @inline(__always)
    private static func evenOddTerms(_ packed: borrowing InlineArray<18, Double>, _ eps: Double) -> Terms {
        var terms = Terms(repeating: 0)
        let eps2 = eps * eps
        var power = eps
        var offset = 0
        for l in 1...order {
            let degree = (order - l) / 2
            terms[l] = power * polynomial(degree: degree, packed, from: offset, eps2) / packed[offset + degree + 1]
            offset += degree + 2
            power *= eps
        }
        return terms
    }

    // MARK: Longitude (A₃, C₃): polynomials in ε whose coefficients are polynomials in n.

    /// The coefficients of A₃ as a polynomial in ε (highest power first), already evaluated at
    /// WGS84's n, since n is a constant here.
    private static let a3Coefficients: InlineArray<6, Double> = {
        let packed: InlineArray<18, Double> = [
            -3, 128,
            -2, -3, 64,
            -1, -3, -1, 16,
            3, -1, -2, 8,
            1, -1, 2,
            1, 1,
        ]
        var result = InlineArray<6, Double>(repeating: 0)
        var offset = 0
        for (k, j) in stride(from: order - 1, through: 0, by: -1).enumerated() {  // coefficient of εʲ
            let degree = min(order - j - 1, j)  // degree of the polynomial in n
            result[k] =
                polynomial(degree: degree, packed, from: offset, WGS84.thirdFlattening) / packed[offset + degree + 1]
            offset += degree + 2
        }
        return result
    }()

    /// A₃.
    static func a3(_ eps: Double) -> Double {
        polynomial(degree: order - 1, a3Coefficients, from: 0, eps)
    }

    /// The coefficients of C₃ₗ, l = 1…5, as polynomials in ε (each highest power first, concatenated),
    /// already evaluated at WGS84's n.
    private static let c3Coefficients: InlineArray<15, Double> = {
        let packed: InlineArray<45, Double> = [
            3, 128,
            2, 5, 128,
            -1, 3, 3, 64,
            -1, 0, 1, 8,
            -1, 1, 4,
            5, 256,
            1, 3, 128,
            -3, -2, 3, 64,
            1, -3, 2, 32,
            7, 512,
            -10, 9, 384,
            5, -9, 5, 192,
            7, 512,
            -14, 7, 512,
            21, 2560,
        ]
        var result = InlineArray<15, Double>(repeating: 0)
        var count = 0
        var offset = 0
        for l in 1..<order {
            for j in stride(from: order - 1, through: l, by: -1) {  // coefficient of εʲ in C₃ₗ
                let degree = min(order - j - 1, j)
                result[count] =
                    polynomial(degree: degree, packed, from: offset, WGS84.thirdFlattening)
                    / packed[offset + degree + 1]
                count += 1
                offset += degree + 2
            }
        }
        precondition(count == 15)
        return result
    }()

    /// C₃ₗ for l = 1…5 (the longitude series has one term fewer; term 6 is zero).
    static func c3(_ eps: Double) -> Terms {
        let c3Coefficients = Self.c3Coefficients
        var terms = Terms(repeating: 0)
        var power = 1.0
        var offset = 0
        for l in 1..<order {
            let degree = order - l - 1
            power *= eps
            terms[l] = power * polynomial(degree: degree, c3Coefficients, from: offset, eps)
            offset += degree + 1
        }
        return terms
    }

    // MARK: Evaluation

    /// Σₗ cₗ sin 2lx for l = 1…6, given sin x and cos x, by Clenshaw summation.
    ///
    /// Clenshaw needs one cosine (of 2x) instead of six sines, and is numerically stable. A zero
    /// sixth term (as in C₃) leaves the result bit-for-bit unchanged.
    static func sinSeries(sin sinx: Double, cos cosx: Double, _ c: Terms) -> Double {
        let twoCos2x = 2 * (cosx - sinx) * (cosx + sinx)
        var y0 = 0.0
        var y1 = 0.0
        var k = order  // even, so the terms pair up: (6, 5), (4, 3), (2, 1)
        while k > 0 {
            // Two steps per pass, so y0 and y1 end in their original roles.
            y1 = twoCos2x * y0 - y1 + c[k]
            y0 = twoCos2x * y1 - y0 + c[k - 1]
            k -= 2
        }
        return 2 * sinx * cosx * y0
    }

    /// Horner evaluation of `p[from]·x^degree + … + p[from + degree]`, over a fixed table (the coefficients of
    /// the series: no array, no lazy global to check).
    @inline(__always)
    static func polynomial<let N: Int>(
        degree: Int, _ p: borrowing InlineArray<N, Double>, from start: Int, _ x: Double
    ) -> Double {
        var y = p[start]
        var i = start
        var remaining = degree
        while remaining > 0 {
            remaining -= 1
            i += 1
            y = y * x + p[i]
        }
        return y
    }
}
