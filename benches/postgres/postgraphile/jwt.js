// Prints a JWT for serve.sh's `tuned` mode: `node jwt.js <group--team>` (HS256, secret
// $JWT_SECRET as in serve.sh, audience `postgraphile`, valid 24 h). PostGraphile exposes the claim
// `team` to PostgreSQL as `jwt.claims.team`, which rls.sql's policies read.
'use strict';
const jwt = require('jsonwebtoken');

const team = process.argv[2];
if (!team) {
    console.error('usage: node jwt.js <group--team>');
    process.exit(2);
}
const secret = process.env.JWT_SECRET || 'cp-postgraphile-peer-benchmark-only';
console.log(jwt.sign({ team }, secret, { algorithm: 'HS256', audience: 'postgraphile', expiresIn: '24h' }));
