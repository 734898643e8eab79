import AgentCore

#if canImport(Glibc)
import Glibc
#endif

/// The `Date` header value (RFC 9110 §5.6.7, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`), formatted
/// at most once a second per connection: a response reuses the previous text within the
/// same second. Not thread-safe; each connection's handler owns one.
struct HTTPDate {
    private var second = -1
    private var text = ""

    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The current time's header value.
    mutating func now() -> String {
        let seconds = time(nil)
        if seconds != second {
            second = seconds
            text = Self.format(seconds)
        }
        return text
    }

    /// `seconds` since the epoch as an IMF-fixdate.
    static func format(_ seconds: Int) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { zeroPadded(n, width: 2) }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(1900 + parts.tm_year) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
