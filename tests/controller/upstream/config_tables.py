"""Upstream's table test of the cloud config's service overrides, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/aws_test.go`` at commit
63ec440c3275321b55afa45480e2fdfd2b0e93c4: ``TestValidateOverridesActiveConfig`` (read the
config, then ``ValidateOverrides``). Each case is (name, config text, expect an error,
overrides active); the texts are upstream's inputs with their indentation (tabs as ``\\t``).
"""

from __future__ import annotations

VALIDATE_OVERRIDES: list[tuple[str, str, bool, bool]] = [
    ("No overrides", """
\t\t\t\t[global]
\t\t\t\t""", False, False),
    ("Missing Service Name", """
                [global]

                [ServiceOverride "1"]
                 Region=sregion
                 URL=https://s3.foo.bar
                 SigningRegion=sregion
                 SigningMethod = sign
                """, True, False),
    ("Missing Service Region", """
                [global]

                [ServiceOverride "1"]
                 Service=s3
                 URL=https://s3.foo.bar
                 SigningRegion=sregion
                 SigningMethod = sign
                 """, True, False),
    ("Missing URL", """
                  [global]

                  [ServiceOverride "1"]
                   Service="s3"
                   Region=sregion
                   SigningRegion=sregion
                   SigningMethod = sign
                  """, True, False),
    ("Missing Signing Region", """
                [global]

                [ServiceOverride "1"]
                 Service=s3
                 Region=sregion
                 URL=https://s3.foo.bar
                 SigningMethod = sign
                 """, True, False),
    ("Active Overrides", """
                [Global]

               [ServiceOverride "1"]
                Service = "s3      "
                Region = sregion
                URL = https://s3.foo.bar
                SigningRegion = sregion
                SigningMethod = v4
                """, False, True),
    ("Multiple Overridden Services", """
                [Global]
                 vpc = vpc-abc1234567

\t\t\t\t[ServiceOverride "1"]
                  Service=s3
                  Region=sregion1
                  URL=https://s3.foo.bar
                  SigningRegion=sregion1
                  SigningMethod = v4

\t\t\t\t[ServiceOverride "2"]
                  Service=ec2
                  Region=sregion2
                  URL=https://ec2.foo.bar
                  SigningRegion=sregion2
                  SigningMethod = v4""", False, True),
    ("Duplicate Services", """
                [Global]
                 vpc = vpc-abc1234567

\t\t\t\t[ServiceOverride "1"]
                  Service=s3
                  Region=sregion1
                  URL=https://s3.foo.bar
                  SigningRegion=sregion
                  SigningMethod = sign

\t\t\t\t[ServiceOverride "2"]
                  Service=s3
                  Region=sregion1
                  URL=https://s3.foo.bar
                  SigningRegion=sregion
                  SigningMethod = sign""", True, False),
    ("Multiple Overridden Services in Multiple regions", """
                 [global]

\t\t\t\t[ServiceOverride "1"]
                 Service=s3
                 Region=region1
                 URL=https://s3.foo.bar
                 SigningRegion=sregion1

\t\t\t\t[ServiceOverride "2"]
                 Service=ec2
                 Region=region2
                 URL=https://ec2.foo.bar
                 SigningRegion=sregion
                 SigningMethod = v4
                 """, False, True),
    ("Multiple regions, Same Service", """
                 [global]

\t\t\t\t[ServiceOverride "1"]
                Service=s3
                Region=region1
                URL=https://s3.foo.bar
                SigningRegion=sregion1
                SigningMethod = v3

\t\t\t\t[ServiceOverride "2"]
                 Service=s3
                 Region=region2
                 URL=https://s3.foo.bar
                 SigningRegion=sregion1
\t\t\t\t SigningMethod = v4
                 SigningName = "name"
                 """, False, True),
]  # fmt: skip
