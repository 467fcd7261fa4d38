# tests/forge.pl IN OUT CODE: copies the safetensors file IN to OUT with its
# header rewritten by the Perl CODE (run with $_ = the header's JSON, its
# padding removed), padded again to 8 bytes and its length fixed; the data
# section is copied as it is. The CLI tests forge checkpoints with it.
# CODE may also rewrite the data section, $::data (bytes), and set
# $::len_delta, added to the header length written (-1 writes a length one
# byte short of the header).
use strict;
use warnings;
my ($in, $out, $code) = @ARGV;
open(my $f, '<:raw', $in) or die "$in: $!\n";
my $d = do { local $/; <$f> };
close $f;
my $n = unpack('Q<', substr($d, 0, 8));
local $_ = substr($d, 8, $n);
our $data = substr($d, 8 + $n);
our $len_delta = 0;
s/ +$//;
eval $code;
die $@ if $@;
$_ .= ' ' x ((8 - length($_) % 8) % 8);
open(my $o, '>:raw', $out) or die "$out: $!\n";
print $o pack('Q<', length($_) + $len_delta), $_, $data;
close $o or die "$out: $!\n";
