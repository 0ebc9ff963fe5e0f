// SPDX-License-Identifier: MIT
pragma solidity 0.8.37;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title TestToken
/// @notice Freely mintable ERC-20 used as the payment token on local and test chains only.
/// @dev Never deploy to a chain where the token has value: anyone can mint.
contract TestToken is ERC20 {
    constructor() ERC20("VTP Test Token", "VTPT") {}

    /// @notice Mints `amount` tokens to `to`. Open to anyone: this is a faucet for dev chains.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
