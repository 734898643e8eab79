import DERP
import WireGuard

/// The last transaction ID heard from each ping source, so that a disco Ping repeating it
/// (a duplicate delivery, or a captured Ping replayed) gets no second Pong.
///
/// magicsock keeps one received TxID per candidate address of a peer (`lastGotPingTxID`,
/// compared in `addCandidateEndpoint`), over UDP and over DERP alike, where a Ping's
/// candidate is `127.3.3.40:<region>`; a Ping whose TxID equals it is not answered, any
/// other TxID replaces it. A candidate learned from pings is forgotten 45 s after its last
/// ping. ``PeerPath`` does that for UDP sources it keeps as candidates; this memory serves
/// the sources it does not keep: every Ping over DERP (by sender disco key, DERP source node
/// key and region) and UDP sources a full candidate table turned away.
///
/// Bounded: at most ``capacity`` sources; one TxID each, kept ``lifetime`` after the last
/// Ping from its source. A new source in a full memory replaces the one heard from least
/// recently (expired ones first, as they are the oldest).
struct RecentPings: Sendable {
    /// Who sent a Ping and which way it came.
    struct Source: Hashable, Sendable {
        enum Via: Hashable, Sendable {
            case udp(DiscoEndpoint)
            /// Over a relay connection to `region`, from the DERP source node key `node`.
            case derp(node: WireGuardPublicKey, region: Int32)
        }

        var sender: X25519PublicKey
        var via: Via
    }

    struct Entry: Sendable {
        var txID: [UInt8]
        var heardAt: WireGuardInstant
    }

    /// Sources remembered at most (a few hundred bytes each).
    static let capacity = 1024
    /// A source's TxID is remembered this long after its last Ping (magicsock's lifetime of
    /// a ping-learned candidate, `sessionActiveTimeout`).
    static let lifetime = DirectTimers.sessionActiveTimeout

    private(set) var entries: [Source: Entry] = [:]
    /// Where each recent TxID came from, by sender (at most ``capacity``, kept ``lifetime``).
    private(set) var origins: [TxID: (via: Source.Via, heardAt: WireGuardInstant)] = [:]

    struct TxID: Hashable, Sendable {
        var sender: X25519PublicKey
        var txID: [UInt8]
    }

    init() {}

    /// A verified Ping with `txID` from `source` at `now`: true when the same TxID came from
    /// another address or relay within ``lifetime``. The peer sends each TxID once, to one of
    /// our addresses, so a second origin is a copy: a captured Ping replayed from spoofed
    /// sources, which would otherwise have each of them sent a padded Pong (a reflection) and
    /// taken as the peer's address.
    mutating func isCopy(_ txID: [UInt8], from source: Source, now: WireGuardInstant) -> Bool {
        let key = TxID(sender: source.sender, txID: txID)
        if let origin = origins[key], now.since(origin.heardAt) <= Self.lifetime {
            return origin.via != source.via
        }
        if origins[key] == nil, origins.count >= Self.capacity {
            origins = origins.filter { now.since($0.value.heardAt) <= Self.lifetime }
            if origins.count >= Self.capacity, let oldest = origins.min(by: { $0.value.heardAt < $1.value.heardAt })?.key {
                origins[oldest] = nil
            }
        }
        origins[key] = (source.via, now)
        return false
    }

    /// A verified Ping with `txID` from `source` at `now`: true when it repeats the last
    /// TxID from that source (not to be answered). Either way the source was heard now and
    /// `txID` is its last one.
    mutating func isRepeat(_ txID: [UInt8], from source: Source, now: WireGuardInstant) -> Bool {
        if let entry = entries[source], now.since(entry.heardAt) <= Self.lifetime {
            entries[source] = Entry(txID: txID, heardAt: now)
            return entry.txID == txID
        }
        if entries[source] == nil, entries.count >= Self.capacity, let oldest = entries.min(by: { $0.value.heardAt < $1.value.heardAt })?.key {
            entries[oldest] = nil
        }
        entries[source] = Entry(txID: txID, heardAt: now)
        return false
    }
}
