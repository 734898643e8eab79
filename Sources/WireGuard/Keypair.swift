/// One session's transport keys (whitepaper §5.4.5): a send key, a receive key, the send
/// counter and the receive replay window, with the indices that name the session.
struct Keypair: Sendable {
    var sendKey: Key32
    var receiveKey: Key32
    var sendCounter: UInt64 = 0
    var replay = ReplayWindow()
    let created: WireGuardInstant
    /// True when this side sent the initiation.
    let isInitiator: Bool
    /// Our index (in the device's index table) and the peer's.
    let localIndex: UInt32
    let remoteIndex: UInt32

    init(sendKey: Key32, receiveKey: Key32, created: WireGuardInstant, isInitiator: Bool, localIndex: UInt32, remoteIndex: UInt32) {
        self.sendKey = sendKey
        self.receiveKey = receiveKey
        self.created = created
        self.isInitiator = isInitiator
        self.localIndex = localIndex
        self.remoteIndex = remoteIndex
    }

    /// True while packets may be sent on this session.
    func canSend(now: WireGuardInstant) -> Bool {
        sendCounter < WireGuardTimers.rejectAfterMessages && now.since(created) < WireGuardTimers.rejectAfterTime
    }

    /// True while packets may be received on this session.
    func canReceive(now: WireGuardInstant) -> Bool {
        now.since(created) < WireGuardTimers.rejectAfterTime
    }

    mutating func zeroize() {
        sendKey.zeroize()
        receiveKey.zeroize()
    }
}
