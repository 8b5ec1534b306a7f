package postgres

// What the tests of package postgres_test look into.
var (
	ClaimableSQL = claimableSQL
	ChannelFor   = channelFor
)
