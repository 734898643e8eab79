import Synchronization

/// One announcement banner of the deployment (`GetAnnouncementBanners`), as SSH login shells
/// show it.
public struct AnnouncementBanner: Sendable, Equatable {
    public var enabled: Bool
    public var message: String
    public var backgroundColor: String

    public init(enabled: Bool, message: String, backgroundColor: String = "") {
        self.enabled = enabled
        self.message = message
        self.backgroundColor = backgroundColor
    }
}

/// The control plane's latest announcement banners: the upward session stores them (after
/// connecting, then every 2 minutes), the SSH server reads them for each login shell.
///
/// Memory: at most ``maxBanners`` banners of at most ``maxMessageBytes`` of message each
/// (64 KiB in all); a longer list is cut, a longer message cut on a character boundary.
public final class AnnouncementBanners: Sendable {
    /// Banners kept; the rest of a longer list is dropped.
    public static let maxBanners = 16
    /// UTF-8 bytes of one banner's message kept (and of its colour).
    public static let maxMessageBytes = 4096

    private let banners = Mutex<[AnnouncementBanner]>([])

    public init() {}

    /// Replaces the banners with `list`, cut to the bounds.
    public func store(_ list: [AnnouncementBanner]) {
        let kept = list.prefix(Self.maxBanners).map { banner in
            AnnouncementBanner(
                enabled: banner.enabled, message: Self.cut(banner.message, toBytes: Self.maxMessageBytes),
                backgroundColor: Self.cut(banner.backgroundColor, toBytes: Self.maxMessageBytes))
        }
        banners.withLock { $0 = kept }
    }

    /// The banners stored last (none before the first answer).
    public var current: [AnnouncementBanner] { banners.withLock { $0 } }

    /// `text` cut to at most `limit` UTF-8 bytes, on a character boundary.
    static func cut(_ text: String, toBytes limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var end = text.utf8.index(text.utf8.startIndex, offsetBy: limit)
        while end > text.startIndex, text.utf8[end] & 0xC0 == 0x80 { end = text.utf8.index(before: end) }
        return String(text[..<end])
    }
}
