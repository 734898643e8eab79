/// The three sessions a peer may hold (wireguard-go's Keypairs): `current` sends, `previous`
/// still receives during a rotation, `next` is a responder's session until the initiator's
/// first transport message confirms it.
struct Keypairs: Sendable {
    var previous: Keypair?
    var current: Keypair?
    var next: Keypair?

    /// Which slot holds the session with local index `index`.
    enum Slot { case previous, current, next }

    func slot(of index: UInt32) -> Slot? {
        if current?.localIndex == index { return .current }
        if next?.localIndex == index { return .next }
        if previous?.localIndex == index { return .previous }
        return nil
    }

    /// The local indices in use.
    var indices: [UInt32] { [previous?.localIndex, current?.localIndex, next?.localIndex].compactMap { $0 } }
}
