/// WireGuard's protocol constants (wireguard-go's device/constants.go), in nanoseconds.
public enum WireGuardTimers {
    static let second: UInt64 = 1_000_000_000
    /// Start a new handshake after this many messages on a session (2^60).
    public static let rekeyAfterMessages: UInt64 = 1 << 60
    /// Never send or accept a counter at or beyond this (2^64 − 2^13 − 1).
    public static let rejectAfterMessages: UInt64 = UInt64.max - (1 << 13)
    /// The initiator re-keys when it sends on a session this old (120 s).
    public static let rekeyAfterTime: UInt64 = 120 * second
    /// No packet is sent or accepted on a session this old (180 s).
    public static let rejectAfterTime: UInt64 = 180 * second
    /// Handshake retries stop after this long (90 s).
    public static let rekeyAttemptTime: UInt64 = 90 * second
    /// Wait for a handshake response this long before retrying (5 s, plus jitter).
    public static let rekeyTimeout: UInt64 = 5 * second
    /// The jitter added to each retry: up to 334 ms.
    public static let rekeyTimeoutJitterMax: UInt64 = 334_000_000
    /// A passive keepalive is sent this long after data arrived with nothing sent (10 s).
    public static let keepaliveTimeout: UInt64 = 10 * second
    /// Retries per handshake attempt: RekeyAttemptTime / RekeyTimeout = 18.
    public static let maxHandshakeAttempts = 18
    /// Keys are zeroed this long after the last session was derived (3 × RejectAfterTime).
    public static let zeroKeysAfter: UInt64 = 3 * rejectAfterTime
    /// Initiations from one peer closer together than this are dropped (flood).
    public static let handshakeInitiationRate: UInt64 = 20_000_000
    /// A cookie from a reply is used for mac2 this long (120 s).
    public static let cookieRefreshTime: UInt64 = 120 * second
}
