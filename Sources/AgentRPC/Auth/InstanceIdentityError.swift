/// Why an instance-identity exchange gave no token, in the reference's words where it has them.
public struct InstanceIdentityError: Error, CustomStringConvertible, Equatable {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
