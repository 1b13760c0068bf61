package policy

import (
	"encoding/json"
	"strconv"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// mintWith signs payload (claims, or raw JSON bytes) with s, with extra
// protected headers.
func mintWith(t *testing.T, s *signer, payload any, extra map[jose.HeaderKey]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", s.kid)
	for k, v := range extra {
		opts = opts.WithHeader(k, v)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: s.key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := payload.([]byte)
	if !ok {
		b, _ = json.Marshal(payload)
	}
	obj, err := sig.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOAuthIssuerConfusion: with two issuers, one of them an attacker's
// (it signs whatever it likes, with the same key id as the other), a
// token is verified with the keys of the issuer its iss names only: the
// attacker's key cannot sign for the other issuer, however the payload
// names it (twice, in another case), and the keys a token's header
// points to or embeds (jku, jwk, x5u) are never used.
func TestOAuthIssuerConfusion(t *testing.T) {
	t.Parallel()
	var evil *testIdP
	f := newOAuthFixture(t, func(c *config.Config, _ *testIdP) {
		evil = newTestIdP(t)
		c.Auth.OAuth.Issuers = append(c.Auth.OAuth.Issuers, config.Issuer{Issuer: evil.srv.URL})
	})
	evilKey := newRSA(t, "k1") // the victim issuer's key id
	evil.publish(evilKey)
	mine := newRSA(t, "mine")
	a, e := f.idp.srv.URL, evil.srv.URL
	exp := f.clock.Now().Unix() + 300
	raw := func(members string) []byte {
		return []byte(`{"sub":"alice","aud":"` + testResource + `","exp":` + strconv.FormatInt(exp, 10) + `,` + members + `}`)
	}

	// The attacker's own tokens are its own identity.
	if id, err := f.o.Identify(mint(t, evilKey, f.claims(map[string]any{"iss": e}))); err != nil || id.ID != "oauth:"+e+"#alice" {
		t.Fatalf("the second issuer's own token: %+v, %v", id, err)
	}
	for name, tok := range map[string]string{
		"iss of the victim, the attacker's key":     mint(t, evilKey, f.claims(nil)),
		"iss twice, the victim's last":              mintWith(t, evilKey, raw(`"iss":"`+e+`","iss":"`+a+`"`), nil),
		"ISS and iss, the victim's last":            mintWith(t, evilKey, raw(`"ISS":"`+e+`","iss":"`+a+`"`), nil),
		"iss and ISS, the victim's last":            mintWith(t, evilKey, raw(`"iss":"`+e+`","ISS":"`+a+`"`), nil),
		"an embedded jwk":                           mintWith(t, mine, f.claims(nil), map[jose.HeaderKey]any{"jwk": mine.public()}),
		"a jku to the attacker's keys":              mintWith(t, evilKey, f.claims(nil), map[jose.HeaderKey]any{"jku": e + "/jwks"}),
		"an x5u":                                    mintWith(t, mine, f.claims(nil), map[jose.HeaderKey]any{"x5u": e + "/cert.pem"}),
		"an unknown crit, the issuer's own key":     mintWith(t, f.key, f.claims(nil), map[jose.HeaderKey]any{"crit": []string{"x-gw"}, "x-gw": true}),
		"a nested JWT (cty JWT)":                    mintWith(t, f.key, []byte(`"`+f.token(t, nil)+`"`), map[jose.HeaderKey]any{"cty": "JWT"}),
		"exp far in the future as 1e300 (a number)": f.token(t, map[string]any{"exp": 1e300}),
		"nbf far in the future":                     f.token(t, map[string]any{"nbf": 1 << 39}),
		"aud an empty list":                         f.token(t, map[string]any{"aud": []string{}}),
	} {
		if id, err := f.o.Identify(tok); err == nil {
			t.Errorf("%s: accepted as %+v", name, id)
		}
	}
}
