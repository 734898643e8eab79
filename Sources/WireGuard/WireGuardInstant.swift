/// A point on the owner's monotonic clock, in nanoseconds from any origin the owner picks
/// (e.g. `ContinuousClock.now` minus a start instant). WireGuard never reads a clock
/// itself: every call takes `now`, so tests drive time by hand.
public struct WireGuardInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the owner's origin.
    public var nanoseconds: UInt64

    /// An instant `nanoseconds` after the origin.
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// The origin.
    public static let zero = WireGuardInstant(nanoseconds: 0)

    /// An instant whole seconds (plus milliseconds) after the origin.
    public static func seconds(_ seconds: UInt64, milliseconds: UInt64 = 0) -> WireGuardInstant {
        WireGuardInstant(nanoseconds: seconds * 1_000_000_000 + milliseconds * 1_000_000)
    }

    /// This instant moved later by `nanoseconds` (saturating).
    public func adding(nanoseconds delta: UInt64) -> WireGuardInstant {
        let (sum, overflow) = nanoseconds.addingReportingOverflow(delta)
        return WireGuardInstant(nanoseconds: overflow ? .max : sum)
    }

    /// Nanoseconds from `earlier` to this instant, 0 when `earlier` is later.
    public func since(_ earlier: WireGuardInstant) -> UInt64 {
        nanoseconds >= earlier.nanoseconds ? nanoseconds - earlier.nanoseconds : 0
    }

    /// Earlier on the owner's clock.
    public static func < (lhs: WireGuardInstant, rhs: WireGuardInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// Seconds since the origin.
    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}
