"""The selected provider (Anvil or py-evm, see PROVIDER) deploys and runs project contracts."""


def test_test_token_mints_on_selected_provider(project, accounts):
    owner, other = accounts[0], accounts[1]
    token = owner.deploy(project.TestToken)
    token.mint(other, 5 * 10**18, sender=owner)
    assert token.balanceOf(other) == 5 * 10**18
    assert token.totalSupply() == 5 * 10**18
