/// A prebuilt workspace was claimed (`/reinit`'s `data` event): the agent starts again for its owner.
public struct ReinitEvent: Sendable, Equatable {
    public var workspaceID: String
    public var reason: String
    /// nil when coderd left it out (the zero UUID).
    public var ownerID: String?

    public init(workspaceID: String, reason: String, ownerID: String?) {
        self.workspaceID = workspaceID
        self.reason = reason
        self.ownerID = ownerID
    }
}
